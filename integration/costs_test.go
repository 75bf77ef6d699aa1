package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/wait"
)

// sha3Batch is a batch of n web3_sha3 calls, each with its own params (from seed on): no
// answer of one can be a cached answer of another.
func sha3Batch(seed, n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"web3_sha3","params":["0x%08x"]}`, i+1, seed+i)
	}
	b.WriteByte(']')
	return b.String()
}

// wantBatchLimited checks that every answer of a batch is -32005 "limit exceeded".
func wantBatchLimited(t *testing.T, n int, body []byte) {
	t.Helper()
	var answers []struct {
		Result json.RawMessage
		Error  struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(body, &answers); err != nil || len(answers) != n {
		t.Fatalf("want %d answers: %v %.300s", n, err, body)
	}
	for i, a := range answers {
		if a.Error.Code != -32005 || !strings.HasPrefix(a.Error.Message, "limit exceeded") || a.Result != nil {
			t.Fatalf("answer %d: %.300s", i, body)
		}
	}
}

// TestSpentBudgetRefusesForwardedMethods: the methods once priced 0 but forwarded to a node
// (web3_sha3, net_listening, eth_syncing) cost a unit each, so a client whose budget (100
// units, next to no refill) is spent cannot reach the node with them: of 20 batches of 100
// web3_sha3 with distinct params the first is served (100 units) and the other 19 are refused
// whole, 429 and -32005 per call; a junk-param eth_syncing and net_listening are refused the
// same way; over a WebSocket too. The node sees 100 web3_sha3, the budget's worth, and nothing
// else of them. eth_chainId, answered by web3gate itself, stays free.
func TestSpentBudgetRefusesForwardedMethods(t *testing.T) {
	up := newFakeUpstream(t, 1)
	up.result("web3_sha3", `"0x`+strings.Repeat("ab", 32)+`"`)
	up.result("net_listening", `true`)
	up.result("eth_syncing", `false`)
	const budget = 100
	// Upstream batching off: the fake node counts one call per HTTP request.
	cfg := fmt.Sprintf(`
log: {level: warn}
auth:
  clients: [{id: test-client}]
  tokens:
    - {sha256: %s, principal: tester}
upstreams:
  mainnet: 1
  timeout: 2s
  pollInterval: 100ms
  batch: {enabled: false}
  chains:
    - {chainId: 1, name: one, urls: [%s]}
rateLimit: {client: {rate: 0.001, burst: %d}, principal: {rate: 1000, burst: 100000}}
`, sha256Hex("test-token"), up.srv.URL, budget)
	ts := startServer(t, cfg)
	url := ts.API + "/v1/web3/mainnet"
	served, refused := 0, 0
	for i := range 20 {
		code, h, body := post(t, url, sha3Batch(i*100, 100))
		switch code {
		case http.StatusOK:
			served++
		case http.StatusTooManyRequests:
			refused++
			wantBatchLimited(t, 100, body)
			if h.Get("Retry-After") == "" {
				t.Fatalf("batch %d refused without Retry-After: %s", i, limitHeaders(h))
			}
		default:
			t.Fatalf("batch %d: %d %.300s", i, code, body)
		}
	}
	if served != 1 || refused != 19 {
		t.Fatalf("%d batches served, %d refused; want 1 and 19", served, refused)
	}
	for _, call := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_syncing","params":["junk"]}`,
		`{"jsonrpc":"2.0","id":1,"method":"net_listening","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"web3_sha3","params":["0x01"]}`,
	} {
		code, _, body := post(t, url, call)
		wantLimited(t, code, body)
	}
	if code, _, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`); code != 200 || !strings.Contains(string(body), `"result":"0x1"`) {
		t.Fatalf("eth_chainId, answered locally, with a spent budget: %d %s", code, body)
	}

	ws, _ := dialWS(t, ts, "/v1/web3/mainnet", http.Header{"X-Api-Key": {"test-client"}, "Authorization": {"Bearer test-token"}})
	wantBatchLimited(t, 100, ws.roundTrip(t, sha3Batch(5000, 100)))
	for _, m := range []string{"web3_sha3", "net_listening", "eth_syncing"} {
		params := []any{}
		if m != "net_listening" {
			params = []any{"0x02"}
		}
		if r := ws.call(t, m, params...); r.Error == nil || r.Error.Code != -32005 {
			t.Fatalf("%s over the socket with a spent budget: %+v", m, r)
		}
	}

	if n := up.count("web3_sha3"); n != budget {
		t.Errorf("the node got %d web3_sha3, want %d (the budget's worth)", n, budget)
	}
	if n := up.count("net_listening") + up.count("eth_syncing"); n != 0 {
		t.Errorf("the node got %d net_listening/eth_syncing with a spent budget", n)
	}
	if got := metric(t, ts.Admin, `web3gate_ratelimit_units_total{client="other"}`); got != budget {
		t.Errorf("units charged %v, want %d", got, budget)
	}
}

// TestQuotaCountsForwardedMethods: web3_sha3 and net_listening count against a client's
// quota like any read: with a daily quota of 3 units, the fourth call is refused by the
// quota, and the usage route reports the 3 units.
func TestQuotaCountsForwardedMethods(t *testing.T) {
	cfg := devConfig(t)
	on := strings.Replace(cfg, "quotas:\n", "quotas:\n  clients: [{clientId: "+config.DevClientID+", daily: 3}]\n", 1)
	on = strings.Replace(on, "  enabled: false\n  # Usage charged", "  enabled: true\n  # Usage charged", 1)
	on = strings.Replace(on, "  clients: []\n  # clients:", "  # clients:", 1)
	if on == cfg || strings.Count(on, "enabled: true\n  # Usage charged") != 1 {
		t.Fatal("config.yaml changed: the quotas section was not found")
	}
	ts := startServer(t, withAdminToken(t, on))
	url := ts.API + "/v1/web3/mainnet"
	creds := []string{"X-API-Key", config.DevClientID, "Authorization", "Bearer " + config.DevToken}
	for i, call := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"web3_sha3","params":["0x01"]}`,
		`{"jsonrpc":"2.0","id":1,"method":"net_listening","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"web3_sha3","params":["0x02"]}`,
	} {
		if code, _, body := post(t, url, call, creds...); code != 200 || !strings.Contains(string(body), `"result":`) {
			t.Fatalf("call %d within the quota: %d %s", i+1, code, body)
		}
	}
	code, _, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"web3_sha3","params":["0x03"]}`, creds...)
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":-32005`) ||
		!strings.Contains(string(body), "quota exceeded: daily quota of 3 units spent") {
		t.Fatalf("web3_sha3 past the quota: %d %s", code, body)
	}
	code, usage := get(t, ts.Admin+"/v1/admin/usage?clientId="+config.DevClientID, adminAuth...)
	if code != 200 || !strings.Contains(usage, `"used":3,"quota":3,"remaining":0`) {
		t.Fatalf("usage: %d %s", code, usage)
	}
}

// TestGetLogsPastHeadOnDevChain: on the embedded dev chain (go-ethereum), eth_getLogs from
// head-4 to past the head gets geth's own -32602 "block range extends beyond current head
// block", unchanged, not a partial success; 100 such queries leave the node's chunk size,
// and so the upstream calls of a following eth_getLogs over the whole chain, as they were.
func TestGetLogsPastHeadOnDevChain(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "    chunkSize: 2000\n", "    chunkSize: 4\n", 1)
	cfg = strings.Replace(cfg, "    minChunkSize: 10\n", "    minChunkSize: 1\n", 1)
	if !strings.Contains(cfg, "    chunkSize: 4\n") || !strings.Contains(cfg, "    minChunkSize: 1\n") {
		t.Fatal("config.yaml changed: upstreams.getLogs.chunkSize not found")
	}
	ts := startServer(t, cfg)
	url := ts.API + "/v1/web3/mainnet"
	var hashes []common.Hash
	for i := range 12 { // a block each
		r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{transfer(devAccount3, int64(i+1))}, devAuth...)
		var h common.Hash
		if r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
			t.Fatalf("transfer %d: %+v", i, r)
		}
		hashes = append(hashes, h)
		waitMined(t, url, hashes[i:])
	}
	var head hexutil.Uint64
	if r := rpcCall(t, http.DefaultClient, url, "eth_blockNumber", []any{}, devAuth...); r.Error != nil || json.Unmarshal(r.Result, &head) != nil || head < 12 {
		t.Fatalf("head: %+v", r)
	}
	// The pool's head, which bounds the chunks, at the chain's.
	wait.For(t, "the pool at the dev chain's head", func() bool {
		_, body := get(t, ts.Admin+"/metrics")
		return strings.Contains(body, fmt.Sprintf(`web3gate_upstream_head_block{chain="dev",node="embedded"} %d`+"\n", uint64(head)))
	})
	chunks := func() float64 { return metric(t, ts.Admin, `web3gate_upstream_getlogs_chunks_total{chain="dev"}`) }
	// The whole chain, for logs of addr (each call its own: the response cache answers a
	// repeated one).
	whole := func(addr string) float64 {
		before := chunks()
		r := rpcCall(t, http.DefaultClient, url, "eth_getLogs", []any{map[string]any{"fromBlock": "0x0", "toBlock": hexutil.Uint64(head).String(), "address": addr}}, devAuth...)
		if r.Error != nil {
			t.Fatalf("whole chain: %+v", r.Error)
		}
		return chunks() - before
	}
	want := float64(uint64(head)/4 + 1)
	if n := whole("0x00000000000000000000000000000000000000a1"); n != want {
		t.Fatalf("whole chain in %v upstream calls, want %v", n, want)
	}
	for i := range 100 { // each its own address: none is a cached answer
		past := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"%s","toBlock":"%s","address":"0x%040x"}]}`,
			hexutil.Uint64(head-4), hexutil.Uint64(head+2), 0x100+i)
		code, _, body := post(t, url, past, devAuth...)
		if code != 200 || string(body) != `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"block range extends beyond current head block"}}` {
			t.Fatalf("query %d past the head: %d %s", i, code, body)
		}
	}
	if n := whole("0x00000000000000000000000000000000000000a2"); n != want {
		t.Fatalf("after 100 queries past the head the whole chain took %v upstream calls, want %v", n, want)
	}
	if n := metric(t, ts.Admin, `web3gate_upstream_getlogs_halvings_total{chain="dev"}`); n != 0 {
		t.Errorf("%v halvings", n)
	}
}
