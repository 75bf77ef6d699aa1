package ratelimit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
)

// serveStage serves the stage on a real loopback listener: a JSON-RPC route (/rpc) whose
// calls the stage charges before a terminal that answers "ok", and a REST route (/rest)
// behind the stage's REST limiter.
func serveStage(t *testing.T, s *Stage, reg *prometheus.Registry) string {
	t.Helper()
	terminal := proxy.HandlerFunc(func(*proxy.Call) (*proxy.Response, error) { return &proxy.Response{Result: []byte(`"ok"`)}, nil })
	rest := proxy.RESTHandlerFunc(func(*proxy.RESTRequest) (*proxy.RESTResponse, error) {
		return &proxy.RESTResponse{Member: "x", Body: []byte(`1`)}, nil
	})
	var pc proxy.Config
	pc.SetDefaults()
	srv, err := proxy.New(pc, proxy.Deps{Logger: zap.NewNop(), Registry: reg, KnownChain: func(uint64) bool { return true }, Routes: []*proxy.Route{
		{Name: "rpc", Method: http.MethodPost, Pattern: "/rpc", ChainID: 1, Handler: proxy.Compile(terminal, s)},
		{Name: "rest", Method: http.MethodGet, Pattern: "/rest", REST: s.REST(rest)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String()
}

func do(t *testing.T, method, url, clientID, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if clientID != "" {
		req.Header.Set("X-API-Key", clientID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// counterQuotas is a quota of max units per client, spent for good.
type counterQuotas struct {
	mu   sync.Mutex
	max  uint64
	used map[string]uint64
}

type quotaErr struct{ msg string }

func (e *quotaErr) Error() string             { return e.msg }
func (e *quotaErr) RetryAfter() time.Duration { return 90*time.Minute + time.Millisecond }

func (q *counterQuotas) Charge(clientID string, units uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used[clientID]+units > q.max {
		return &quotaErr{fmt.Sprintf("quota exceeded: %d of %d units used today", q.used[clientID], q.max)}
	}
	q.used[clientID] += units
	return nil
}

func TestQuotaRefusal(t *testing.T) {
	q := &counterQuotas{max: 3, used: map[string]uint64{}}
	reg := prometheus.NewRegistry()
	s := newTestStage(t, Config{Enabled: true, Clients: []ClientConfig{{ClientID: "gold", Rate: Rate{Rate: 1000, Burst: 1000}}}},
		Deps{Registry: reg, Quotas: q})
	url := serveStage(t, s, reg) + "/rpc"
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`
	for i := range 3 {
		if code, _, body := do(t, http.MethodPost, url, "gold", call); code != 200 || body != `{"jsonrpc":"2.0","id":1,"result":"ok"}` {
			t.Fatalf("call %d: %d %s", i, code, body)
		}
	}
	code, h, body := do(t, http.MethodPost, url, "gold", call)
	if code != http.StatusTooManyRequests || body != `{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"quota exceeded: 3 of 3 units used today"}}` {
		t.Fatalf("over the quota: %d %s", code, body)
	}
	if got := h.Get("Retry-After"); got != "5401" {
		t.Errorf("Retry-After %q, want 5401 (90 min and a millisecond, rounded up)", got)
	}
	if got := h.Get("RateLimit-Limit"); got != "1000" {
		t.Errorf("RateLimit-Limit %q", got)
	}
	// eth_chainId costs nothing: the spent quota does not refuse it.
	if code, _, body := do(t, http.MethodPost, url, "gold", `{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`); code != 200 {
		t.Fatalf("free call: %d %s", code, body)
	}
	if got := counter(t, reg, "web3gate_ratelimit_requests_total", "gold", "quota"); got != 1 {
		t.Errorf("quota refusals counted %v", got)
	}
}

// counter is the value of the series of name with the client (and outcome, when not empty)
// labels.
func counter(t *testing.T, reg *prometheus.Registry, name, client, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["client"] == client && (outcome == "" || l["outcome"] == outcome) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestMetricsLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestStage(t, Config{Enabled: true, REST: RESTConfig{Enabled: true}, Clients: []ClientConfig{{ClientID: "gold", Rate: Rate{Rate: 1000, Burst: 1000}}}},
		Deps{Registry: reg, KnownClient: func(id string) bool { return id == "gold" || strings.HasPrefix(id, "known-") }})
	base := serveStage(t, s, reg)
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`
	do(t, http.MethodPost, base+"/rpc", "gold", call)
	for i := range 20 {
		do(t, http.MethodPost, base+"/rpc", fmt.Sprint("client-", i), call)
		do(t, http.MethodGet, base+"/rest", fmt.Sprint("known-", i), "")
	}
	do(t, http.MethodGet, base+"/rest", "", "")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "web3gate_ratelimit_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "client" {
					seen[lp.GetValue()] = true
				}
			}
		}
	}
	if len(seen) != 3 || !seen["gold"] || !seen["other"] || !seen["anonymous"] {
		t.Fatalf("client label values %v, want gold, other, anonymous", seen)
	}
	for _, c := range []struct {
		client string
		want   float64
	}{{"gold", 1}, {"other", 40}, {"anonymous", 1}} {
		if got := counter(t, reg, "web3gate_ratelimit_requests_total", c.client, "allowed"); got != c.want {
			t.Errorf("%s allowed %v, want %v", c.client, got, c.want)
		}
	}
}

func TestBatchChargedOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestStage(t, Config{Enabled: true, Client: Rate{Rate: 0.001, Burst: 5}}, Deps{Registry: reg})
	url := serveStage(t, s, reg) + "/rpc"
	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[]},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]},{"jsonrpc":"2.0","id":3,"method":"eth_chainId"},{"jsonrpc":"2.0","id":4}]`
	code, h, body := do(t, http.MethodPost, url, "c", batch) // 2 + 1 + 0; the invalid element costs nothing
	if code != 200 || h.Get("RateLimit-Remaining") != "2" || h.Get("RateLimit-Limit") != "5" {
		t.Fatalf("first batch: %d %v %s", code, h, body)
	}
	code, h, body = do(t, http.MethodPost, url, "c", batch)
	want := `[{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"limit exceeded: the request costs 3 compute units, more than its budget has left (2 of 5); retry after 1000 s"}},` +
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32005,"message":"limit exceeded: the request costs 3 compute units, more than its budget has left (2 of 5); retry after 1000 s"}},` +
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32005,"message":"limit exceeded: the request costs 3 compute units, more than its budget has left (2 of 5); retry after 1000 s"}},` +
		`{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"method must be a string"}}]`
	if code != http.StatusTooManyRequests || body != want || h.Get("Retry-After") != "1000" || h.Get("RateLimit-Remaining") != "2" {
		t.Fatalf("second batch: %d Retry-After %q Remaining %q\n%s", code, h.Get("Retry-After"), h.Get("RateLimit-Remaining"), body)
	}
	// The refused batch took nothing: two single calls of 1 unit pass.
	for i := range 2 {
		if code, _, body := do(t, http.MethodPost, url, "c", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); code != 200 {
			t.Fatalf("single %d: %d %s", i, code, body)
		}
	}
	if got := counter(t, reg, "web3gate_ratelimit_units_total", "other", ""); got != 5 {
		t.Errorf("units %v, want 5", got)
	}
}
