package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/proxy"
)

// logLine is one JSON line of the server's log, with the request log's fields.
type logLine struct {
	Level, Msg, Logger string
	ReqID              string `json:"req_id"`
	Route              string
	Status             int
	Client, Principal  string
	Method             string
	Methods            []string
	Calls              int
	Code               int
	Codes              []int
	Failed             int
	Error              string
	Took               float64
	Websocket          bool
	Suppressed         int
	Scope, Reason      string
	Message            string
}

// logLines parses the log; a line that is not JSON fails the test.
func logLines(t *testing.T, log *lockedLog) []logLine {
	t.Helper()
	var out []logLine
	for _, s := range strings.Split(log.String(), "\n") {
		if s == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("a log line that is not JSON: %q: %v", s, err)
		}
		out = append(out, l)
	}
	return out
}

// linesOf are the lines that carry the request id id.
func linesOf(lines []logLine, id string) []logLine {
	var out []logLine
	for _, l := range lines {
		if l.ReqID == id {
			out = append(out, l)
		}
	}
	return out
}

// TestFailedRequestsLogOneLine: a 401 and a 503 each produce one log line, carrying the
// request id the answer returned in X-Request-Id (the client's own when it sent a valid one,
// else one the server made), with the route, the method, the status, the error code and the
// duration, and never the token; a success produces none (log.requests.sampleSuccess 0).
func TestFailedRequestsLogOneLine(t *testing.T) {
	up := newFakeUpstream(t, 1)
	var log lockedLog
	ts := startServerIn(t, twoChainsConfig("{level: info}", up.srv.URL, closedPort(t), ""), t.TempDir(), &log)
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`

	status, h401, _ := post(t, ts.API+"/v1/web3/mainnet", body, "Authorization", "Bearer wrong-token-secret")
	id401 := h401.Get("X-Request-Id")
	status503, h503, _ := post(t, ts.API+"/v1/web3/chains/2", body, "X-Request-Id", "lb-trace:0001")
	statusOK, hOK, _ := post(t, ts.API+"/v1/web3/mainnet", body, "X-Request-Id", "bad id with spaces")
	idOK := hOK.Get("X-Request-Id")
	if status != 401 || status503 != 503 || statusOK != 200 {
		t.Fatalf("statuses %d %d %d, want 401 503 200", status, status503, statusOK)
	}
	if id401 == "" || h503.Get("X-Request-Id") != "lb-trace:0001" || idOK == "" || idOK == "bad id with spaces" {
		t.Fatalf("request ids %q %q %q", id401, h503.Get("X-Request-Id"), idOK)
	}
	// A long id is replaced too.
	if _, h, _ := post(t, ts.API+"/v1/web3/mainnet", body, "X-Request-Id", strings.Repeat("a", 129)); len(h.Get("X-Request-Id")) > 128 {
		t.Errorf("a 129-character X-Request-Id was kept")
	}
	ts.stop()

	lines := logLines(t, &log)
	l401 := linesOf(lines, id401)
	if len(l401) != 1 {
		t.Fatalf("%d lines with the 401's id %s, want 1:\n%s", len(l401), id401, log.String())
	}
	if l := l401[0]; l.Msg != "request failed" || l.Level != "info" || l.Route != "mainnet" || l.Status != 401 || l.Code != 4100 ||
		l.Method != "eth_blockNumber" || l.Client != proxy.ClientFingerprint("test-client") || l.Error == "" || l.Took <= 0 {
		t.Errorf("401 line %+v", l)
	}
	l503 := linesOf(lines, "lb-trace:0001")
	if len(l503) != 1 {
		t.Fatalf("%d lines with the 503's id, want 1:\n%s", len(l503), log.String())
	}
	if l := l503[0]; l.Msg != "request failed" || l.Level != "warn" || l.Route != "chains" || l.Status != 503 ||
		l.Code != -32011 || l.Principal != "tester" || l.Client != proxy.ClientFingerprint("test-client") {
		t.Errorf("503 line %+v", l)
	}
	if n := len(linesOf(lines, idOK)); n != 0 {
		t.Errorf("%d lines for a success", n)
	}
	for _, secret := range []string{"wrong-token-secret", "test-token", `"test-client"`} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log holds %s", secret)
		}
	}
}

// TestBatchAndSampledLines: a batch's line lists its methods and the codes of its errors; a
// request for no route has its line; with sampleSuccess 1 every success has one too.
func TestBatchAndSampledLines(t *testing.T) {
	up := newFakeUpstream(t, 1)
	var log lockedLog
	ts := startServerIn(t, twoChainsConfig("{level: info, requests: {sampleSuccess: 1}}", up.srv.URL, closedPort(t), ""), t.TempDir(), &log)
	_, hb, _ := post(t, ts.API+"/v1/web3/mainnet", `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]},{"jsonrpc":"2.0","id":2,"method":"eth_nope","params":[]}]`)
	_, hOK, _ := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`)
	_, h404, _ := request(t, http.MethodGet, ts.API+"/v1/nope/"+"test-client", nil)
	ts.stop()
	lines := logLines(t, &log)

	b := linesOf(lines, hb.Get("X-Request-Id"))
	if len(b) != 1 || b[0].Msg != "request failed" || b[0].Status != 200 || b[0].Calls != 2 || b[0].Failed != 1 ||
		strings.Join(b[0].Methods, ",") != "eth_blockNumber,eth_nope" || len(b[0].Codes) != 1 || b[0].Codes[0] != -32601 {
		t.Errorf("batch lines %+v", b)
	}
	ok := linesOf(lines, hOK.Get("X-Request-Id"))
	if len(ok) != 1 || ok[0].Msg != "request" || ok[0].Status != 200 || ok[0].Method != "eth_blockNumber" || ok[0].Code != 0 {
		t.Errorf("sampled success lines %+v", ok)
	}
	nf := linesOf(lines, h404.Get("X-Request-Id"))
	if len(nf) != 1 || nf[0].Status != 404 || nf[0].Route != "" || nf[0].Error != "no such route" {
		t.Errorf("404 lines %+v", nf)
	}
	if strings.Contains(log.String(), "/v1/nope") {
		t.Error("the path of an unmatched request is logged: it may hold a client id")
	}
}

// TestFloodOfRefusalsIsBounded: 200 refused requests of one kind write log.flood.lines
// lines, and one summary counting the others (written at the latest when the server stops).
func TestFloodOfRefusalsIsBounded(t *testing.T) {
	up := newFakeUpstream(t, 1)
	var log lockedLog
	ts := startServerIn(t, strings.Replace(upstreamConfig("", up.srv.URL), "log: {level: warn}", "log: {level: info, flood: {lines: 5, interval: 1h}}", 1), t.TempDir(), &log)
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`
	for range 200 {
		if status, _, _ := post(t, ts.API+"/v1/web3/mainnet", body, "Authorization", "Bearer nope"); status != 401 {
			t.Fatalf("status %d", status)
		}
	}
	ts.stop()
	var failed, summaries []logLine
	for _, l := range logLines(t, &log) {
		switch l.Msg {
		case "request failed":
			failed = append(failed, l)
		case logx.SummaryMessage:
			summaries = append(summaries, l)
		}
	}
	if len(failed) != 5 {
		t.Errorf("%d request lines for 200 refusals, want 5", len(failed))
	}
	if len(summaries) != 1 || summaries[0].Suppressed != 195 || summaries[0].Scope != "mainnet" || summaries[0].Reason != "401/4100" ||
		summaries[0].Message != "request failed" {
		t.Errorf("summaries %+v", summaries)
	}
}

// TestWebSocketRequestIDs: the upgrade's 101 and a refused upgrade both carry X-Request-Id;
// the refusal is logged with it.
func TestWebSocketRequestIDs(t *testing.T) {
	up := newFakeUpstream(t, 1)
	var log lockedLog
	ts := startServerIn(t, strings.Replace(upstreamConfig("", up.srv.URL), "log: {level: warn}", "log: {level: info}", 1), t.TempDir(), &log)
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial(wsURL(ts, "/v1/web3/mainnet"), http.Header{"X-Api-Key": {"test-client"}, "Authorization": {"Bearer test-token"}, "X-Request-Id": {"ws-1"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if resp.Header.Get("X-Request-Id") != "ws-1" {
		t.Errorf("101 X-Request-Id %q", resp.Header.Get("X-Request-Id"))
	}
	_, resp, err = d.Dial(wsURL(ts, "/v1/web3/mainnet"), http.Header{"X-Api-Key": {"test-client"}, "Authorization": {"Bearer nope"}})
	if err == nil || resp == nil || resp.StatusCode != 401 || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("refused upgrade: %v %+v", err, resp)
	}
	id := resp.Header.Get("X-Request-Id")
	ts.stop()
	if l := linesOf(logLines(t, &log), id); len(l) != 1 || l[0].Status != 401 || l[0].Code != 4100 {
		t.Errorf("lines of the refused upgrade: %+v", l)
	}
}

// TestRequestIDReachesUpstreamAndSendLogs: the client's X-Request-Id is on the lines of the
// upstream attempts its call made (upstream attempt failed, debug) and on the nonce
// manager's line of its send (transaction sent).
func TestRequestIDReachesUpstreamAndSendLogs(t *testing.T) {
	t.Run("upstream attempts", func(t *testing.T) {
		up := newFakeUpstream(t, 1)
		up.mu.Lock()
		up.routes["eth_getBalance"] = func(w http.ResponseWriter, _ json.RawMessage) { w.WriteHeader(http.StatusBadGateway) }
		up.mu.Unlock()
		var log lockedLog
		ts := startServerIn(t, strings.Replace(upstreamConfig("", up.srv.URL), "log: {level: warn}", "log: {level: debug}", 1), t.TempDir(), &log)
		status, _, body := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`,
			"X-Request-Id", "trace-upstream-1")
		ts.stop()
		if status < 500 {
			t.Fatalf("eth_getBalance against a failing node: %d %s", status, body)
		}
		var attempts, failed int
		for _, l := range linesOf(logLines(t, &log), "trace-upstream-1") {
			switch l.Msg {
			case "upstream attempt failed":
				attempts++
			case "request failed":
				failed++
			}
		}
		if attempts == 0 || failed != 1 {
			t.Errorf("%d upstream attempt lines and %d request lines with the request id:\n%s", attempts, failed, log.String())
		}
	})
	t.Run("send", func(t *testing.T) {
		var log lockedLog
		ts := startServerIn(t, strings.Replace(devConfig(t), "level: warn", "level: info", 1), t.TempDir(), &log)
		r := rpcCall(t, http.DefaultClient, ts.API+"/v1/web3/mainnet", "eth_sendTransaction", []any{transfer(devAccount3, 1)}, "X-Request-Id", "trace-send-1")
		if r.Error != nil {
			t.Fatalf("eth_sendTransaction: %+v", r.Error)
		}
		ts.stop()
		var hash string
		if err := json.Unmarshal(r.Result, &hash); err != nil {
			t.Fatal(err)
		}
		sent := 0
		for _, s := range strings.Split(log.String(), "\n") {
			if strings.Contains(s, `"msg":"transaction sent"`) && strings.Contains(s, `"req_id":"trace-send-1"`) && strings.Contains(s, hash) {
				sent++
			}
		}
		if sent != 1 {
			t.Errorf("%d 'transaction sent' lines with the request id and hash %s:\n%s", sent, hash, log.String())
		}
	})
}
