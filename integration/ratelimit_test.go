package integration

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
)

// rateConfig serves chain 1 from the node at url, with three client ids (test-client,
// second-client, gold) and two tokens (test-token: principal tester; other-token: principal
// someone), and the rate limits of extra.
func rateConfig(url, extra string) string {
	return fmt.Sprintf(`
log: {level: warn}
auth:
  clients: [{id: test-client}, {id: second-client}, {id: gold}]
  tokens:
    - {sha256: %s, principal: tester}
    - {sha256: %s, principal: someone}
upstreams:
  mainnet: 1
  timeout: 2s
  pollInterval: 100ms
  chains:
    - {chainId: 1, name: one, urls: [%s]}
%s`, sha256Hex("test-token"), sha256Hex("other-token"), url, extra)
}

const blockNumberCall = `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`

// limitHeaders are the RateLimit-* and Retry-After headers of an answer.
func limitHeaders(h http.Header) string {
	return fmt.Sprintf("limit=%s remaining=%s reset=%s retry=%s", h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"), h.Get("Retry-After"))
}

// waitRetryAfter sleeps the seconds of h's Retry-After: the wait the server asked for.
func waitRetryAfter(t *testing.T, h http.Header) {
	t.Helper()
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n < 1 {
		t.Fatalf("Retry-After %q", h.Get("Retry-After"))
	}
	time.Sleep(time.Duration(n) * time.Second)
}

func wantLimited(t *testing.T, code int, body []byte) {
	t.Helper()
	var r struct {
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(body, &r); err != nil || code != http.StatusTooManyRequests || r.Error.Code != -32005 || !strings.HasPrefix(r.Error.Message, "limit exceeded") {
		t.Fatalf("want 429 -32005 limit exceeded, got %d %s", code, body)
	}
}

// TestRateLimitPerClient: a client id's budget (rate 1/s, burst 3) allows three calls, each
// answer saying what is left, refuses the fourth with 429, -32005 and Retry-After 1, leaves
// another client id's budget alone, and allows a call again once Retry-After has passed.
func TestRateLimitPerClient(t *testing.T) {
	up := newFakeUpstream(t, 1)
	ts := startServer(t, rateConfig(up.srv.URL, "rateLimit: {client: {rate: 1, burst: 3}, principal: {rate: 1000, burst: 1000}}"))
	url := ts.API + "/v1/web3/mainnet"
	for i := range 3 {
		code, h, body := post(t, url, blockNumberCall)
		if code != 200 || limitHeaders(h) != fmt.Sprintf("limit=3 remaining=%d reset=%d retry=", 2-i, i+1) {
			t.Fatalf("call %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	code, h, body := post(t, url, blockNumberCall)
	wantLimited(t, code, body)
	if limitHeaders(h) != "limit=3 remaining=0 reset=3 retry=1" {
		t.Fatalf("refused: %s", limitHeaders(h))
	}
	if code, h, body := post(t, url, blockNumberCall, "X-API-Key", "second-client"); code != 200 || h.Get("RateLimit-Remaining") != "2" {
		t.Fatalf("another client id: %d %s %s", code, limitHeaders(h), body)
	}
	// Free methods pass with a spent budget.
	if code, _, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`); code != 200 {
		t.Fatalf("eth_chainId: %d %s", code, body)
	}
	waitRetryAfter(t, h)
	if code, h, body := post(t, url, blockNumberCall); code != 200 {
		t.Fatalf("after Retry-After: %d %s %s", code, limitHeaders(h), body)
	}
	if got := metric(t, ts.Admin, `web3gate_ratelimit_requests_total{client="other",outcome="limited"}`); got != 1 {
		t.Errorf("limited counted %v", got)
	}
}

// TestRateLimitPerPrincipal: a principal's budget is shared by the client ids it comes
// through, and is the tighter one reported; another principal has its own.
func TestRateLimitPerPrincipal(t *testing.T) {
	up := newFakeUpstream(t, 1)
	ts := startServer(t, rateConfig(up.srv.URL, `rateLimit:
  client: {rate: 1000, burst: 1000}
  principals: [{id: tester, rate: 0.5, burst: 2}]`))
	url := ts.API + "/v1/web3/mainnet"
	for i := range 2 {
		if code, h, body := post(t, url, blockNumberCall); code != 200 || h.Get("RateLimit-Limit") != "2" {
			t.Fatalf("call %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	code, h, body := post(t, url, blockNumberCall, "X-API-Key", "second-client")
	wantLimited(t, code, body)
	if h.Get("Retry-After") != "2" { // a unit every 2s
		t.Fatalf("Retry-After %s", limitHeaders(h))
	}
	if code, h, body := post(t, url, blockNumberCall, "X-API-Key", "second-client", "Authorization", "Bearer other-token"); code != 200 || h.Get("RateLimit-Limit") != "1000" { // the client's, tighter than someone's 10000
		t.Fatalf("another principal: %d %s %s", code, limitHeaders(h), body)
	}
	waitRetryAfter(t, h)
	if code, h, body := post(t, url, blockNumberCall, "X-API-Key", "second-client"); code != 200 {
		t.Fatalf("after Retry-After: %d %s %s", code, limitHeaders(h), body)
	}
}

// TestRateLimitBatchCost: a batch costs the sum of its calls, charged once: allowed whole, or
// refused whole (429, each call -32005) without taking anything.
func TestRateLimitBatchCost(t *testing.T) {
	up := newFakeUpstream(t, 1)
	up.result("eth_call", `"0x"`)
	ts := startServer(t, rateConfig(up.srv.URL, "rateLimit: {client: {rate: 0.001, burst: 10}, principal: {rate: 1000, burst: 1000}}"))
	url := ts.API + "/v1/web3/mainnet"
	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x0000000000000000000000000000000000000001"},"0x1"]},` +
		`{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]},{"jsonrpc":"2.0","id":3,"method":"eth_sendRawTransaction","params":["0x00"]}]`
	// 2 + 1 + 10 = 13 units: more than the burst, so charged the burst: allowed with a full bucket.
	code, h, body := post(t, url, `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":3,"method":"eth_call","params":[{"to":"0x0000000000000000000000000000000000000001"},"0x1"]}]`)
	if code != 200 || h.Get("RateLimit-Remaining") != "6" {
		t.Fatalf("batch of 4 units: %d %s %s", code, limitHeaders(h), body)
	}
	code, h, body = post(t, url, batch)
	if code != http.StatusTooManyRequests || h.Get("RateLimit-Remaining") != "6" || h.Get("Retry-After") == "" {
		t.Fatalf("batch of 13 units: %d %s %s", code, limitHeaders(h), body)
	}
	var answers []struct {
		ID    int
		Error struct{ Code int }
	}
	if err := json.Unmarshal(body, &answers); err != nil || len(answers) != 3 {
		t.Fatalf("%v %s", err, body)
	}
	for _, a := range answers {
		if a.Error.Code != -32005 {
			t.Fatalf("call %d: %s", a.ID, body)
		}
	}
	// Nothing was taken by the refused batch: six single units pass, the seventh does not.
	for i := range 6 {
		if code, h, body := post(t, url, blockNumberCall); code != 200 {
			t.Fatalf("single %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	code, _, body = post(t, url, blockNumberCall)
	wantLimited(t, code, body)
}

// TestRateLimitREST: the REST routes are limited per source address, and per client id when
// a known one is sent; an unknown X-API-Key counts as none. X-Forwarded-For counts only from
// a trusted proxy.
func TestRateLimitREST(t *testing.T) {
	up := newFakeUpstream(t, 1)
	limits := "rateLimit: {rest: {ip: {rate: 0.001, burst: 2}, client: {rate: 0.001, burst: 3}}}\n"
	ts := startServer(t, rateConfig(up.srv.URL, limits))
	url := ts.API + "/v1/products"
	for i := range 2 {
		if code, h, body := getH(t, url); code != 200 || limitHeaders(h) != fmt.Sprintf("limit=2 remaining=%d reset=%d retry=", 1-i, 1000*(i+1)) {
			t.Fatalf("GET %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	code, h, body := getH(t, url)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "1000" ||
		!strings.HasPrefix(body, `{"error":{"code":429,"status":"Too Many Requests","request":"`) || !strings.Contains(body, `"message":"limit exceeded: too many requests; retry after 1000 s"`) {
		t.Fatalf("third GET: %d %s %s", code, limitHeaders(h), body)
	}
	if code, _, body := getH(t, url, "X-API-Key", "nobody"); code != http.StatusTooManyRequests {
		t.Fatalf("an unknown client id is limited by its address: %d %s", code, body)
	}
	if code, _, body := getH(t, url, "X-Forwarded-For", "198.51.100.1"); code != http.StatusTooManyRequests {
		t.Fatalf("X-Forwarded-For from an untrusted peer counted: %d %s", code, body)
	}
	for i := range 3 {
		if code, h, body := getH(t, url, "X-API-Key", "test-client"); code != 200 || h.Get("RateLimit-Limit") != "3" {
			t.Fatalf("client GET %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	if code, _, body := getH(t, url+"?apiKey=test-client"); code != http.StatusTooManyRequests {
		t.Fatalf("the client's fourth: %d %s", code, body)
	}
	if got := metric(t, ts.Admin, `web3gate_ratelimit_requests_total{client="anonymous",outcome="limited"}`); got != 3 {
		t.Errorf("anonymous limited %v, want 3", got)
	}

	// Behind a trusted proxy (loopback here), each forwarded address has its own budget.
	tp := startServer(t, rateConfig(up.srv.URL, limits+"server: {trustedProxies: [127.0.0.0/8]}\n"))
	url = tp.API + "/v1/products"
	for i := range 2 {
		if code, _, body := getH(t, url, "X-Forwarded-For", "6.6.6.6, 198.51.100.1"); code != 200 {
			t.Fatalf("A %d: %d %s", i, code, body)
		}
	}
	if code, _, body := getH(t, url, "X-Forwarded-For", "7.7.7.7, 198.51.100.1"); code != http.StatusTooManyRequests {
		t.Fatalf("A again, with another client-written entry: %d %s", code, body)
	}
	if code, _, body := getH(t, url, "X-Forwarded-For", "198.51.100.2"); code != 200 {
		t.Fatalf("B: %d %s", code, body)
	}
}

// TestRateLimitSharedOnRedis: two replicas on one Redis spend one budget.
func TestRateLimitSharedOnRedis(t *testing.T) {
	up := newCountedChain(t)
	redisURL, prefix := testengine.Redis(t)
	cfg := replicaConfig(up, redisURL, prefix, "rateLimit: {client: {rate: 0.001, burst: 4}, principal: {rate: 1000, burst: 1000}}")
	a, b := startServer(t, cfg), startServer(t, cfg)
	for i, ts := range []*testServer{a, b, a, b} {
		if code, h, body := post(t, ts.API+"/v1/web3/mainnet", blockNumberCall); code != 200 || h.Get("RateLimit-Remaining") != strconv.Itoa(3-i) {
			t.Fatalf("call %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	for _, ts := range []*testServer{a, b} {
		code, _, body := post(t, ts.API+"/v1/web3/mainnet", blockNumberCall)
		wantLimited(t, code, body)
		if got := metric(t, ts.Admin, "web3gate_ratelimit_local_fallback_total"); got != 0 {
			t.Errorf("local fallbacks %v with Redis up", got)
		}
	}
	// The client's budget is in Redis (the principal's, full again within milliseconds,
	// expires as soon).
	keys, err := testengine.RedisKeys(testengine.RedisAddr(), prefix+"rl:c:")
	if err != nil || len(keys) != 1 || keys[0] != prefix+"rl:c:test-client" {
		t.Fatalf("keys %v %v", keys, err)
	}
}

// TestRateLimitRedisDownFallsBackLocal: with Redis unreachable each replica limits alone,
// with its share of the budget (rateLimit.replicas): never unlimited, never failing.
func TestRateLimitRedisDownFallsBackLocal(t *testing.T) {
	up := newCountedChain(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "redis://" + ln.Addr().String() + "/0"
	ln.Close()
	ts := startServer(t, replicaConfig(up, closed, "t:", "rateLimit: {replicas: 2, client: {rate: 0.001, burst: 4}, principal: {rate: 1000, burst: 1000}}"))
	for i := range 2 {
		if code, h, body := post(t, ts.API+"/v1/web3/mainnet", blockNumberCall); code != 200 || h.Get("RateLimit-Limit") != "2" {
			t.Fatalf("call %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	code, _, body := post(t, ts.API+"/v1/web3/mainnet", blockNumberCall)
	wantLimited(t, code, body)
	if got := metric(t, ts.Admin, "web3gate_ratelimit_local_fallback_total"); got != 3 {
		t.Errorf("local fallbacks %v, want 3", got)
	}
}

// TestRateLimitWebSocket: each WebSocket message is charged as a POST body is (a batch once,
// the sum of its calls); a refused message gets -32005 and the socket stays open.
func TestRateLimitWebSocket(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "  client: {rate: 1000000, burst: 1000000}\n", "  client: {rate: 0.001, burst: 10}\n", 1)
	if !strings.Contains(cfg, "rate: 0.001, burst: 10}") {
		t.Fatal("config.yaml changed: no rateLimit.client")
	}
	ts := startServer(t, cfg)
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	w.subscribe(t, "newHeads")                         // 5 units
	if r := w.call(t, "eth_chainId"); r.Error != nil { // free
		t.Fatalf("eth_chainId: %+v", r.Error)
	}
	// A batch of three reads: 3 units, 8 spent.
	if b := w.roundTrip(t, `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":3,"method":"eth_blockNumber"}]`); strings.Contains(string(b), "error") {
		t.Fatalf("batch: %s", b)
	}
	// A batch of three more is refused whole.
	b := w.roundTrip(t, `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":3,"method":"eth_blockNumber"}]`)
	if strings.Count(string(b), `"code":-32005`) != 3 {
		t.Fatalf("batch over the budget: %s", b)
	}
	for i := range 2 {
		if r := w.call(t, "eth_blockNumber"); r.Error != nil {
			t.Fatalf("call %d: %+v", i, r.Error)
		}
	}
	if r := w.call(t, "eth_blockNumber"); r.Error == nil || r.Error.Code != -32005 {
		t.Fatalf("the 11th unit: %+v %s", r.Error, r.Result)
	}
}

// TestRateLimitSubscriptionBySize: eth_subscribe is charged its base (5) plus a unit per
// rateLimit.subscribeBytesPerUnit (1024) bytes of its params: with a budget of 80 units, a
// logs subscription with a filter of ~45 KiB (1000 addresses × 10 topics, within
// server.websocket.logsCriteria) costs 5 + 44 units; a second is refused (-32005, naming its
// cost), while a newHeads subscription (5) still fits.
func TestRateLimitSubscriptionBySize(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "  client: {rate: 1000000, burst: 1000000}\n", "  client: {rate: 0.001, burst: 80}\n", 1)
	if !strings.Contains(cfg, "rate: 0.001, burst: 80}") {
		t.Fatal("config.yaml changed: no rateLimit.client")
	}
	ts := startServer(t, cfg)
	w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = common.BigToAddress(big.NewInt(int64(i + 1))).Hex()
	}
	topics := make([]string, 10)
	for i := range topics {
		topics[i] = common.BigToHash(big.NewInt(int64(i + 1))).Hex()
	}
	params, err := json.Marshal([]any{"logs", map[string]any{"address": addrs, "topics": []any{topics}}})
	if err != nil {
		t.Fatal(err)
	}
	cost := 5 + len(params)/1024
	if cost < 41 || cost > 75 {
		t.Fatalf("a filter costing %d units: the test's budget of 80 is for 41 to 75", cost)
	}
	msg := `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":` + string(params) + `}`
	if r := w.send(t, msg); r.Error != nil {
		t.Fatalf("the first large subscription: %+v", r.Error)
	}
	r := w.send(t, msg)
	if r.Error == nil || r.Error.Code != -32005 || !strings.Contains(r.Error.Message, fmt.Sprintf("the request costs %d compute units", cost)) {
		t.Fatalf("the second large subscription: %+v %s", r.Error, r.Result)
	}
	w.subscribe(t, "newHeads")
}

// TestRateLimitStalledRedis: while Redis answers nothing (DEBUG SLEEP), charges are decided
// locally with the replica's share, answered without waiting for Redis; once it wakes the
// shared budget is used again.
func TestRateLimitStalledRedis(t *testing.T) {
	up := newCountedChain(t)
	srv := testengine.PrivateRedis(t)
	ts := startServer(t, replicaConfig(up, srv.URL(), "t:", "rateLimit: {replicas: 2, client: {rate: 0.001, burst: 6}, principal: {rate: 1000, burst: 1000}}"))
	url := ts.API + "/v1/web3/mainnet"
	if code, h, body := post(t, url, blockNumberCall); code != 200 || h.Get("RateLimit-Limit") != "6" || h.Get("RateLimit-Remaining") != "5" {
		t.Fatalf("with Redis: %d %s %s", code, limitHeaders(h), body)
	}
	const sleep = 6 * time.Second
	over := srv.Stall(sleep)
	stalled := time.Now()
	// This replica's share: 3 units, a fresh local budget.
	for i := range 3 {
		if code, h, body := post(t, url, blockNumberCall); code != 200 || h.Get("RateLimit-Limit") != "3" {
			t.Fatalf("stalled, call %d: %d %s %s", i, code, limitHeaders(h), body)
		}
	}
	code, _, body := post(t, url, blockNumberCall)
	wantLimited(t, code, body)
	// Not a speed assertion: the answers came while Redis still slept.
	if d := time.Since(stalled); d >= sleep-time.Second {
		t.Fatalf("the charges waited for the sleeping Redis (%v)", d)
	}
	if got := metric(t, ts.Admin, "web3gate_ratelimit_local_fallback_total"); got != 4 {
		t.Errorf("local fallbacks %v, want 4", got)
	}
	<-over
	wait.For(t, "redis used again after its sleep", func() bool { return metric(t, ts.Admin, "web3gate_redis_up") == 1 })
	// The shared budget again: 5 units were left there, 4 after this call, fewer when a
	// charge sent before the replica gave up on the sleeping Redis ran once it woke (such a
	// charge counts twice: the limit errs on the strict side).
	code, h, body := post(t, url, blockNumberCall)
	left, _ := strconv.Atoi(h.Get("RateLimit-Remaining"))
	if code != 200 || h.Get("RateLimit-Limit") != "6" || left > 4 || left < 4-3 {
		t.Fatalf("Redis back: %d %s %s", code, limitHeaders(h), body)
	}
}
