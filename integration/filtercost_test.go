package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/testengine"
)

// The charges of the filter methods by block range, through the whole server on the
// embedded dev chain: eth_getFilterLogs costs what eth_getLogs over the filter's range costs,
// and a logs filter's poll what eth_getLogs over the blocks it covers costs.

// unitsCharged is the compute units charged to the client ids without an entry of
// rateLimit.clients (the dev client's) so far.
func unitsCharged(t *testing.T, ts *testServer) float64 {
	t.Helper()
	return metric(t, ts.Admin, `web3gate_ratelimit_units_total{client="other"}`)
}

// filterCall posts method(params) as the dev client and principal, and returns the HTTP
// status, headers and answer.
func filterCall(t *testing.T, ts *testServer, method, params string) (int, http.Header, string) {
	t.Helper()
	code, h, body := post(t, ts.API+"/v1/web3/mainnet", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params), devAuth...)
	return code, h, string(body)
}

// filterID creates a filter with method(params) and returns its id.
func filterID(t *testing.T, ts *testServer, method, params string) string {
	t.Helper()
	code, _, body := filterCall(t, ts, method, params)
	var r struct{ Result string }
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != 200 || len(r.Result) != 34 {
		t.Fatalf("filter id: %d %s", code, body)
	}
	return r.Result
}

// TestFilterLogsChargedLikeGetLogs: eth_newFilter {fromBlock 0x0, toBlock 0x1869f} then
// eth_getFilterLogs is charged as eth_getLogs over the same range (2 + 99999/1000 = 101 CU,
// not the table's 2), answers the same, and the quota usage counts every unit charged.
func TestFilterLogsChargedLikeGetLogs(t *testing.T) {
	cfg := devConfig(t)
	on := strings.Replace(cfg, "  enabled: false\n  # Usage charged", "  enabled: true\n  # Usage charged", 1)
	if on == cfg {
		t.Fatal("config.yaml changed: quotas.enabled not found")
	}
	ts := startServer(t, withAdminToken(t, on))
	crit := `[{"fromBlock":"0x0","toBlock":"0x1869f","address":"0x00000000000000000000000000000000000000a1"}]`

	before := unitsCharged(t, ts)
	_, _, getLogs := filterCall(t, ts, "eth_getLogs", crit)
	if got := unitsCharged(t, ts) - before; got != 101 {
		t.Fatalf("eth_getLogs over 0x0..0x1869f charged %v CU, want 101", got)
	}
	before = unitsCharged(t, ts)
	id := filterID(t, ts, "eth_newFilter", crit)
	if got := unitsCharged(t, ts) - before; got != 5 {
		t.Fatalf("eth_newFilter charged %v CU, want 5", got)
	}
	before = unitsCharged(t, ts)
	_, _, filterLogs := filterCall(t, ts, "eth_getFilterLogs", `["`+id+`"]`)
	if got := unitsCharged(t, ts) - before; got != 101 {
		t.Fatalf("eth_getFilterLogs of the same range charged %v CU, want 101 as eth_getLogs", got)
	}
	if filterLogs != getLogs {
		t.Errorf("eth_getFilterLogs answered %s, eth_getLogs %s", filterLogs, getLogs)
	}
	total := unitsCharged(t, ts)
	code, usage := get(t, ts.Admin+"/v1/admin/usage?clientId="+config.DevClientID, adminAuth...)
	if want := fmt.Sprintf(`"used":%d,`, int(total)); code != 200 || !strings.Contains(usage, want) {
		t.Fatalf("usage: %d %s, want %s (every unit charged)", code, usage, want)
	}
}

// TestFilterLogsRefusedByBudget: a client whose budget (50 CU, next to no refill) pays the
// filter and the table price of eth_getFilterLogs but not its range (99 CU more) gets
// -32005 with HTTP 429 and Retry-After; in a batch only that element is refused, the other
// call is served and the status is 200. The same with the budgets in Redis, every charge
// decided there.
func TestFilterLogsRefusedByBudget(t *testing.T) {
	t.Run("local", func(t *testing.T) { testFilterLogsRefused(t, false) })
	t.Run("redis", func(t *testing.T) { testFilterLogsRefused(t, true) })
}

func testFilterLogsRefused(t *testing.T, redis bool) {
	cfg := devConfig(t)
	small := strings.Replace(cfg, "client: {rate: 1000000, burst: 1000000}", "client: {rate: 0.001, burst: 50}", 1)
	if small == cfg {
		t.Fatal("devConfig changed: the client budget was not found")
	}
	var prefix string
	if redis {
		var url string
		url, prefix = testengine.Redis(t)
		with := strings.Replace(small, "  url: \"\"\n  # Starts every key web3gate writes; give each deployment sharing one Redis its own.\n  keyPrefix: \"web3gate:\"\n",
			fmt.Sprintf("  url: %s\n  keyPrefix: %q\n", url, prefix), 1)
		if with == small {
			t.Fatal("config.yaml changed: redis.url not found")
		}
		small = with
	}
	ts := startServer(t, small)
	id := filterID(t, ts, "eth_newFilter", `[{"fromBlock":"0x0","toBlock":"0x1869f"}]`)

	code, h, body := filterCall(t, ts, "eth_getFilterLogs", `["`+id+`"]`)
	wantLimited(t, code, []byte(body))
	if !strings.Contains(body, "the block range of the call costs 99 compute units") || h.Get("Retry-After") == "" {
		t.Fatalf("refusal: %s %s", body, limitHeaders(h))
	}

	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_getFilterLogs","params":["` + id + `"]},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}]`
	code, _, raw := post(t, ts.API+"/v1/web3/mainnet", batch, devAuth...)
	var answers []struct {
		ID     int
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(raw, &answers); err != nil || code != 200 || len(answers) != 2 {
		t.Fatalf("batch: %d %s", code, raw)
	}
	if a := answers[0]; a.ID != 1 || a.Error == nil || a.Error.Code != -32005 || !strings.HasPrefix(a.Error.Message, "limit exceeded") {
		t.Fatalf("eth_getFilterLogs in the batch: %s", raw)
	}
	if a := answers[1]; a.ID != 2 || a.Error != nil || !strings.HasPrefix(string(a.Result), `"0x`) {
		t.Fatalf("eth_blockNumber in the batch: %s", raw)
	}
	if redis {
		if n := metric(t, ts.Admin, "web3gate_ratelimit_local_fallback_total"); n != 0 {
			t.Errorf("%v charges decided locally, want all in Redis", n)
		}
		if keys, err := testengine.RedisKeys(testengine.RedisAddr(), prefix+"rl:c:"); err != nil || len(keys) != 1 {
			t.Errorf("the client's budget in Redis: keys %v, %v", keys, err)
		}
	}
}

// TestFilterPollsChargedByRange: with getLogsBlocksPerUnit 1, after 24 blocks a logs filter's
// poll costs eth_getLogs over the blocks it covers: a filter bounded to 20 of them 2 + 19 CU,
// an open one 2 + 23 CU at least (24 blocks; more if the dev chain mined empty ones); a poll
// of no new block 1 CU, and a block filter's polls 1 CU each, as before.
func TestFilterPollsChargedByRange(t *testing.T) {
	cfg := devConfig(t)
	perBlock := strings.Replace(cfg, "getLogsBlocksPerUnit: 1000", "getLogsBlocksPerUnit: 1", 1)
	if perBlock == cfg {
		t.Fatal("config.yaml changed: rateLimit.getLogsBlocksPerUnit not found")
	}
	ts := startServer(t, perBlock)
	url := ts.API + "/v1/web3/mainnet"
	blockNumber := func() uint64 {
		var n hexutil.Uint64
		if r := rpcCall(t, http.DefaultClient, url, "eth_blockNumber", []any{}); r.Error != nil || json.Unmarshal(r.Result, &n) != nil {
			t.Fatalf("eth_blockNumber: %+v", r)
		}
		return uint64(n)
	}
	h0 := blockNumber()
	bounded := filterID(t, ts, "eth_newFilter", fmt.Sprintf(`[{"fromBlock":"%s","toBlock":"%s"}]`,
		hexutil.Uint64(h0+2), hexutil.Uint64(h0+21)))
	open := filterID(t, ts, "eth_newFilter", `[{}]`)
	blocks := filterID(t, ts, "eth_newBlockFilter", `[]`)

	var last common.Hash
	for i := range 24 { // a block each
		r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{transfer(devAccount3, int64(i+1))})
		var h common.Hash
		if r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
			t.Fatalf("transfer %d: %+v", i, r)
		}
		waitMined(t, url, []common.Hash{h})
		last = h
	}
	var receipt struct {
		BlockHash   common.Hash
		BlockNumber hexutil.Uint64
	}
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionReceipt", []any{last}); r.Error != nil || json.Unmarshal(r.Result, &receipt) != nil {
		t.Fatalf("receipt: %+v", r)
	}
	if uint64(receipt.BlockNumber) < h0+24 {
		t.Fatalf("the last transfer in block %d, want 24 blocks after %d", receipt.BlockNumber, h0)
	}

	// The block filter, polled until it reports the last transfer's block (the feed has seen
	// it then): a unit a poll.
	poll := func(id string) (float64, string) {
		t.Helper()
		before := unitsCharged(t, ts)
		code, _, body := filterCall(t, ts, "eth_getFilterChanges", `["`+id+`"]`)
		if code != 200 || !strings.Contains(body, `"result":[`) {
			t.Fatalf("poll: %d %s", code, body)
		}
		return unitsCharged(t, ts) - before, body
	}
	deadline := time.Now().Add(30 * time.Second)
	var seen []string
	for !slices.Contains(seen, strings.ToLower(receipt.BlockHash.Hex())) {
		if time.Now().After(deadline) {
			t.Fatalf("the block filter did not report block %d within 30s", receipt.BlockNumber)
		}
		cost, body := poll(blocks)
		if cost != 1 {
			t.Fatalf("a block filter's poll charged %v CU, want 1", cost)
		}
		var r struct{ Result []string }
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		for _, h := range r.Result {
			seen = append(seen, strings.ToLower(h))
		}
		time.Sleep(20 * time.Millisecond)
	}

	if cost, _ := poll(bounded); cost != 2+19 {
		t.Errorf("the bounded filter's poll over its 20 blocks charged %v CU, want 21", cost)
	}
	if cost, _ := poll(open); cost < 2+23 || cost > float64(2+uint64(receipt.BlockNumber)-h0-1) {
		t.Errorf("the open filter's poll over blocks %d..%d charged %v CU, want 2 + its blocks - 1 (25 to %d)",
			h0+1, receipt.BlockNumber, cost, 2+uint64(receipt.BlockNumber)-h0-1)
	}
	for _, id := range []string{bounded, open} {
		if cost, body := poll(id); cost != 1 || !strings.Contains(body, `"result":[]`) {
			t.Errorf("a poll of no new block charged %v CU (%s), want 1", cost, body)
		}
	}
}
