package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
)

func TestIDsEchoedByteForByte(t *testing.T) {
	ts := startServer(t, devConfig(t))
	for _, id := range []string{`1`, `1.0`, `-0`, `1E+2`, `"x\u0041"`, `"ü"`, `null`, `123456789012345678901234567890`} {
		body := `{"jsonrpc":"2.0","method":"eth_blockNumber","id":` + id + `}`
		_, _, got := post(t, ts.API+"/v1/web3/mainnet", body, "X-API-Key", config.DevClientID, "Authorization", "Bearer "+config.DevToken)
		if !bytes.HasPrefix(got, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":"0x`)) {
			t.Errorf("id %s: got %s", id, got)
		}
	}
}

func TestRequestIDEchoedOrMade(t *testing.T) {
	ts := startServer(t, devConfig(t))
	dev := []string{"X-API-Key", config.DevClientID, "Authorization", "Bearer " + config.DevToken}
	_, h, _ := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, append(dev, "X-Request-Id", "trace-42.a:b")...)
	if got := h.Get("X-Request-Id"); got != "trace-42.a:b" {
		t.Errorf("echoed request id %q", got)
	}
	seen := map[string]bool{}
	for _, sent := range []string{"", "has space", strings.Repeat("x", 129), "<script>"} {
		_, h, _ := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, append(dev, "X-Request-Id", sent)...)
		got := h.Get("X-Request-Id")
		if got == "" || got == sent || seen[got] {
			t.Errorf("sent %q: request id %q (seen before: %v)", sent, got, seen[got])
		}
		seen[got] = true
	}
	// The REST error object carries the same id.
	resp, err := http.Get(ts.API + "/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if id := resp.Header.Get("X-Request-Id"); id == "" || !strings.Contains(string(b), `"request":"`+id+`"`) {
		t.Errorf("404 body %s, header id %q", b, id)
	}
}

func TestAdminEndpoints(t *testing.T) {
	ts := startServer(t, devConfig(t))
	if code, body := get(t, ts.Admin+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("healthz %d %s", code, body)
	}
	if code, body := get(t, ts.Admin+"/readyz"); code != 200 {
		t.Errorf("readyz %d %s", code, body)
	}
	dev := []string{"X-API-Key", config.DevClientID, "Authorization", "Bearer " + config.DevToken}
	post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`, dev...)
	// Method names the client makes up never become label values.
	for i := range 20 {
		post(t, ts.API+"/v1/web3/mainnet", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_madeUp%d"}`, i), dev...)
	}
	code, body := get(t, ts.Admin+"/metrics")
	if code != 200 {
		t.Fatalf("metrics %d", code)
	}
	for _, want := range []string{
		`web3gate_rpc_requests_total{code="ok",method="eth_blockNumber",route="mainnet"} 1`,
		`web3gate_rpc_requests_total{code="-32601",method="other",route="mainnet"} 20`,
		`web3gate_rpc_request_duration_seconds_bucket{method="eth_blockNumber",route="mainnet",le="+Inf"} 1`,
		`web3gate_upstream_requests_total{chain="dev",method="eth_blockNumber",node="embedded",outcome="ok"}`,
		`web3gate_upstream_head_block{chain="dev",node="embedded"}`,
		`web3gate_upstream_healthy{chain="dev",node="embedded"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "madeUp") {
		t.Error("a client's method name became a label value")
	}
	if code, _ := get(t, ts.Admin+"/nowhere"); code != 404 {
		t.Errorf("admin unknown path %d", code)
	}
}

func TestReadyzFailsWithoutHealthyUpstream(t *testing.T) {
	up := newFakeUpstream(t, 5) // the wrong chain: never used
	ts := startServer(t, upstreamConfig("", up.srv.URL))
	if code, body := get(t, ts.Admin+"/readyz"); code != 503 || !strings.Contains(body, "one") {
		t.Errorf("readyz %d %s", code, body)
	}
	code, _, body := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}`)
	if code != 503 || !strings.Contains(string(body), `"code":-32011`) {
		t.Errorf("read with no healthy upstream: %d %s", code, body)
	}
	if n := up.count("eth_getBalance"); n != 0 {
		t.Errorf("the wrong-chain node got %d reads", n)
	}
}

func TestUpstreamFailuresGetSpecificErrors(t *testing.T) {
	up := newFakeUpstream(t, 1)
	var hang atomic.Bool
	up.routes["eth_call"] = func(w http.ResponseWriter, id json.RawMessage) {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}`, id)
	}
	up.routes["eth_getCode"] = func(w http.ResponseWriter, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>bad gateway</html>")
	}
	up.routes["eth_getStorageAt"] = func(w http.ResponseWriter, _ json.RawMessage) {
		hang.Store(true)
		time.Sleep(700 * time.Millisecond)
	}
	up.routes["eth_getProof"] = func(w http.ResponseWriter, _ json.RawMessage) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	ts := startServer(t, upstreamConfig("", up.srv.URL))
	url := ts.API + "/v1/web3/mainnet"
	for _, tc := range []struct {
		method string
		status int
		want   string
	}{
		{"eth_call", 200, `{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}`},
		{"eth_getCode", 503, `{"jsonrpc":"2.0","id":7,"error":{"code":-32011,"message":"all upstream attempts failed"}}`},
		{"eth_getStorageAt", 504, `{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"upstream timeout"}}`},
		{"eth_getProof", 503, `{"jsonrpc":"2.0","id":7,"error":{"code":-32011,"message":"all upstream attempts failed"}}`},
	} {
		t.Run(tc.method, func(t *testing.T) {
			code, _, body := post(t, url, `{"jsonrpc":"2.0","id":7,"method":"`+tc.method+`","params":[]}`)
			if code != tc.status || string(body) != tc.want {
				t.Errorf("%d %s\nwant %d %s", code, body, tc.status, tc.want)
			}
		})
	}
	if !hang.Load() {
		t.Error("the hanging route was never reached")
	}
}

func TestCoalescingAndCache(t *testing.T) {
	up := newFakeUpstream(t, 1)
	up.routes["eth_getBalance"] = func(w http.ResponseWriter, id json.RawMessage) {
		time.Sleep(200 * time.Millisecond)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0x2a"}`, id)
	}
	hash := "0x" + strings.Repeat("ab", 32)
	up.result("eth_getBlockByHash", `{"hash":"`+hash+`","number":"0x1"}`)
	up.result("eth_getTransactionReceipt", `null`)
	ts := startServer(t, upstreamConfig("", up.srv.URL))
	url := ts.API + "/v1/web3/mainnet"

	// Ten identical reads at once share one upstream request; each gets its own id back.
	var wg sync.WaitGroup
	bodies := make([]string, 10)
	for i := range bodies {
		wg.Go(func() {
			_, _, b := post(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`, i))
			bodies[i] = string(b)
		})
	}
	wg.Wait()
	for i, b := range bodies {
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":"0x2a"}`, i); b != want {
			t.Errorf("caller %d got %s", i, b)
		}
	}
	if n := up.count("eth_getBalance"); n != 1 {
		t.Errorf("upstream saw %d eth_getBalance requests, want 1", n)
	}

	// A block by hash is cached; a null receipt is not.
	for i := range 3 {
		_, _, b := post(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByHash","params":["%s",false]}`, i, hash))
		if !strings.Contains(string(b), hash) {
			t.Fatalf("block by hash: %s", b)
		}
		post(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getTransactionReceipt","params":["%s"]}`, i, hash))
		time.Sleep(20 * time.Millisecond) // ristretto applies writes asynchronously
	}
	if n := up.count("eth_getBlockByHash"); n != 1 {
		t.Errorf("upstream saw %d eth_getBlockByHash requests, want 1", n)
	}
	if n := up.count("eth_getTransactionReceipt"); n != 3 {
		t.Errorf("upstream saw %d eth_getTransactionReceipt requests, want 3", n)
	}
}

func TestAllowReadsWithClientID(t *testing.T) {
	up := newFakeUpstream(t, 1)
	ts := startServer(t, strings.Replace(upstreamConfig("", up.srv.URL), "principal: tester", "principal: tester\n  allowReadsWithClientId: true", 1))
	url := ts.API + "/v1/web3/mainnet"
	code, _, body := post(t, url, `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_sendTransaction","params":[{}]}]`, "Authorization", "")
	want := `[{"jsonrpc":"2.0","id":1,"result":"0x64"},{"jsonrpc":"2.0","id":2,"error":{"code":4100,"message":"Not Authorized: a bearer access token is required"}}]`
	if code != 200 || string(body) != want {
		t.Errorf("%d %s\nwant %s", code, body, want)
	}
	// A wrong token is still refused outright.
	code, _, body = post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`, "Authorization", "Bearer nope")
	if code != 401 || !strings.Contains(string(body), "Not Authorized") {
		t.Errorf("wrong token: %d %s", code, body)
	}
}
