package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
)

// countingProxy forwards JSON-RPC to an anvil node and counts the calls of each method
// (batches call by call), leaving out the gateway's own polls: eth_chainId, eth_blockNumber
// and the finality poll's eth_getBlockByNumber("latest"|"finalized", false).
type countingProxy struct {
	URL    string
	mu     sync.Mutex
	counts map[string]int
}

func newCountingProxy(t *testing.T, node *anvil.Node) *countingProxy {
	t.Helper()
	p := &countingProxy{counts: map[string]int{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		type call struct {
			Method string
			Params json.RawMessage
		}
		var calls []call
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			_ = json.Unmarshal(body, &calls)
		} else {
			calls = make([]call, 1)
			_ = json.Unmarshal(body, &calls[0])
		}
		p.mu.Lock()
		for _, c := range calls {
			params := string(c.Params)
			if c.Method == "eth_chainId" || c.Method == "eth_blockNumber" ||
				(c.Method == "eth_getBlockByNumber" && (params == `["latest",false]` || params == `["finalized",false]`)) {
				continue
			}
			p.counts[c.Method]++
			var compact bytes.Buffer
			if json.Compact(&compact, c.Params) == nil {
				p.counts[c.Method+" "+compact.String()]++
			}
		}
		p.mu.Unlock()
		resp, err := client.Post(node.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// count is the number of calls of method, or with params (compacted) when given.
func (p *countingProxy) count(method string, params ...string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(params) == 0 {
		return p.counts[method]
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, []byte(params[0]))
	return p.counts[method+" "+compact.String()]
}

// countForms is the number of calls of method with either form of params.
func (p *countingProxy) countForms(method, a, b string) int {
	if a == b {
		return p.count(method, a)
	}
	return p.count(method, a) + p.count(method, b)
}

// cacheConfig is a gateway with the proxy as its only upstream (chain 31337), finality mode
// and depth as given, head entries kept a minute (so a stale one would outlive the test).
func cacheConfig(up *countingProxy, mode string, depth int, cacheOn bool) string {
	return fmt.Sprintf(`
log: {level: warn}
auth:
  clients: [{id: test-client}]
  tokens:
    - sha256: %s
      principal: tester
upstreams:
  mainnet: 31337
  timeout: 5s
  pollInterval: 50ms
  chains:
    - chainId: 31337
      name: anvil
      urls: [%s]
      finality: %s
      finalityDepth: %d
devchain:
  enabled: false
cache:
  enabled: %v
  local: true
  coalesce: true
  unfinalizedTtl: 1m
`, sha256Hex("test-token"), up.URL, mode, depth, cacheOn)
}

// awaitHead waits until the gateway's finality poll saw head.
func awaitHead(t *testing.T, ts *testServer, head uint64) {
	t.Helper()
	wait.For(t, "the gateway's head "+strconv.FormatUint(head, 10), func() bool {
		return metric(t, ts.Admin, `web3gate_upstream_finality_block{block="head",chain="anvil"}`) == float64(head)
	})
}

func anvilCall(t *testing.T, n *anvil.Node, method string, params ...any) json.RawMessage {
	t.Helper()
	r, err := n.Call(method, params...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

const (
	richLower = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266" // anvil's first dev account
	richCheck = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
)

// TestCachePolicyPerMethodOnAnvil: each cached method, asked twice in two forms of the same
// request at a finalized block (or a block hash), reaches anvil once; after the head moves,
// still not again; a latest read reaches it once per head.
func TestCachePolicyPerMethodOnAnvil(t *testing.T) {
	node := anvil.Start(t, 31337)
	anvilCall(t, node, "anvil_mine", "0x64") // head 100; anvil's finalized block is 64 below: 36
	up := newCountingProxy(t, node)
	ts := startServer(t, cacheConfig(up, "auto", 10, true))
	awaitHead(t, ts, 100)
	if got := metric(t, ts.Admin, `web3gate_upstream_finality_block{block="finalized",chain="anvil"}`); got != 36 {
		t.Fatalf("finalized %v, want 36 (the tag)", got)
	}
	var b80 struct{ Hash string }
	if err := json.Unmarshal([]byte(gwCall(t, ts.API, "eth_getBlockByNumber", `["0x50",false]`)), &b80); err != nil || b80.Hash == "" {
		t.Fatalf("block 80: %v", err)
	}
	slot := `"0x0000000000000000000000000000000000000000000000000000000000000000"`
	type form struct{ method, a, b string }
	final := []form{
		{"eth_getBlockByNumber", `["0x5",false]`, `["0x05",false]`},
		{"eth_getBlockReceipts", `["0x5"]`, `["0x005"]`},
		{"eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x10"}]`, `[{"toBlock":"0x010","fromBlock":"0x01","address":[]}]`},
		{"eth_getBalance", `["` + richCheck + `","0x5"]`, `["` + richLower + `",{"blockNumber":"0x5"}]`},
		{"eth_getCode", `["` + richCheck + `","0x5"]`, `["` + richLower + `","0x05"]`},
		{"eth_getTransactionCount", `["` + richCheck + `","` + b80.Hash + `"]`, `["` + richLower + `",{"blockHash":"0x` + strings.ToUpper(b80.Hash[2:]) + `"}]`},
		{"eth_getStorageAt", `["` + richCheck + `","0x0","0x5"]`, `["` + richLower + `",` + slot + `,"0x5"]`},
		{"eth_getProof", `["` + richCheck + `",[` + slot + `],"0x5"]`, `["` + richLower + `",[` + slot + `],{"blockNumber":"0x5"}]`},
		{"eth_call", `[{"to":"` + richCheck + `","data":"0x"},"0x5"]`, `[{"input":"0x","to":"` + richLower + `"},"0x5"]`},
		{"eth_getBlockByHash", `["` + b80.Hash + `",false]`, `["0x` + strings.ToUpper(b80.Hash[2:]) + `",false]`},
	}
	// The same at a block above the finalized one: true at this head only.
	head := []form{
		{"eth_getBalance", `["` + richLower + `","latest"]`, `["` + richCheck + `","latest"]`},
		{"eth_getBlockByNumber", `["0x60",false]`, `["0x060",false]`},
		{"eth_call", `[{"to":"` + richLower + `"}]`, `[{"to":"` + richLower + `"},"latest"]`},
	}
	for _, f := range append(final, head...) {
		a := gwCall(t, ts.API, f.method, f.a)
		if b := gwCall(t, ts.API, f.method, f.b); a != b {
			t.Fatalf("%s: %s answered %s, %s answered %s", f.method, f.a, a, f.b, b)
		}
		if n := up.countForms(f.method, f.a, f.b); n != 1 {
			t.Fatalf("%s %s, %s: %d upstream calls, want 1", f.method, f.a, f.b, n)
		}
	}

	// The head moves: final entries stay, head entries go.
	anvilCall(t, node, "evm_mine")
	awaitHead(t, ts, 101)
	for _, f := range final {
		gwCall(t, ts.API, f.method, f.b)
		if n := up.countForms(f.method, f.a, f.b); n != 1 {
			t.Errorf("%s at a final block reached anvil again after the head moved", f.method)
		}
	}
	for _, f := range head {
		gwCall(t, ts.API, f.method, f.a)
		gwCall(t, ts.API, f.method, f.b)
		if n := up.countForms(f.method, f.a, f.b); n != 2 {
			t.Errorf("%s at the head: %d upstream calls over two heads, want 2", f.method, n)
		}
	}

	// Never cached: pending, and a null block past the head.
	for _, c := range []struct{ method, params string }{
		{"eth_getBalance", `["` + richLower + `","pending"]`},
		{"eth_getBlockByNumber", `["0x1000",false]`},
	} {
		gwCall(t, ts.API, c.method, c.params)
		gwCall(t, ts.API, c.method, c.params)
		if n := up.count(c.method, c.params); n != 2 {
			t.Errorf("%s %s: %d upstream calls, want 2 (not cached)", c.method, c.params, n)
		}
	}
	if got := metric(t, ts.Admin, `web3gate_cache_stores_total{class="final",method="eth_getLogs"}`); got != 1 {
		t.Errorf("final eth_getLogs stores %v, want 1", got)
	}
}

// TestCacheReorgAtTheSameHeight: block 101 and a balance read at it are cached; anvil
// reverts to block 100 and mines another block 101; the gateway answers from the new block
// (its head hash changed), not the cached one, though head entries live a minute.
func TestCacheReorgAtTheSameHeight(t *testing.T) {
	node := anvil.Start(t, 31337)
	anvilCall(t, node, "anvil_mine", "0x64")
	up := newCountingProxy(t, node)
	ts := startServer(t, cacheConfig(up, "auto", 10, true))
	var snap string
	_ = json.Unmarshal(anvilCall(t, node, "evm_snapshot"), &snap)
	const who = "0x00000000000000000000000000000000000000aa"
	anvilCall(t, node, "anvil_setBalance", who, "0x1111")
	anvilCall(t, node, "evm_mine")
	awaitHead(t, ts, 101)
	blockHash := func() string {
		var b struct{ Hash string }
		_ = json.Unmarshal([]byte(gwCall(t, ts.API, "eth_getBlockByNumber", `["0x65",false]`)), &b)
		return b.Hash
	}
	h1 := blockHash()
	for range 3 {
		if got := gwCall(t, ts.API, "eth_getBalance", `["`+who+`","latest"]`); got != `"0x1111"` {
			t.Fatalf("balance %s before the reorg", got)
		}
		if blockHash() != h1 {
			t.Fatal("block 101 changed before the reorg")
		}
	}
	if n := up.count("eth_getBalance") + up.count("eth_getBlockByNumber", `["0x65",false]`); n != 2 {
		t.Fatalf("%d upstream calls before the reorg, want 2 (then hits)", n)
	}

	if r := anvilCall(t, node, "evm_revert", snap); string(r) != "true" {
		t.Fatalf("revert: %s", r)
	}
	anvilCall(t, node, "evm_setNextBlockTimestamp", "0x"+strconv.FormatInt(time.Now().Unix()+1000, 16))
	anvilCall(t, node, "evm_mine")
	wait.For(t, "block 101 of the new branch and its state", func() bool {
		return blockHash() != h1 && gwCall(t, ts.API, "eth_getBalance", `["`+who+`","latest"]`) == `"0x0"`
	})
	// The finality poll may have seen the reverted head (100) last: it reaches the new 101.
	awaitHead(t, ts, 101)
}

// TestCacheFinalityTagVersusDepth: at head 100, block 50 is final by depth 10 (≤ 90) but not
// by anvil's tag (≤ 36): after the head moves, the depth gateway answers it from its cache,
// the tag gateway asks again; block 16 is final for both.
func TestCacheFinalityTagVersusDepth(t *testing.T) {
	node := anvil.Start(t, 31337)
	anvilCall(t, node, "anvil_mine", "0x64")
	upTag, upDepth := newCountingProxy(t, node), newCountingProxy(t, node)
	tag := startServer(t, cacheConfig(upTag, "tag", 10, true))
	depth := startServer(t, cacheConfig(upDepth, "depth", 10, true))
	awaitHead(t, tag, 100)
	awaitHead(t, depth, 100)
	for _, ts := range []*testServer{tag, depth} {
		gwCall(t, ts.API, "eth_getBlockByNumber", `["0x32",false]`)
		gwCall(t, ts.API, "eth_getBlockByNumber", `["0x10",false]`)
	}
	anvilCall(t, node, "evm_mine")
	awaitHead(t, tag, 101)
	awaitHead(t, depth, 101)
	for _, ts := range []*testServer{tag, depth} {
		gwCall(t, ts.API, "eth_getBlockByNumber", `["0x32",false]`)
		gwCall(t, ts.API, "eth_getBlockByNumber", `["0x10",false]`)
	}
	if got := metric(t, tag.Admin, `web3gate_upstream_finality_block{block="finalized",chain="anvil"}`); got != 37 {
		t.Errorf("tag: finalized %v, want 37", got)
	}
	if got := metric(t, depth.Admin, `web3gate_upstream_finality_block{block="finalized",chain="anvil"}`); got != 91 {
		t.Errorf("depth: finalized %v, want 91", got)
	}
	if n := upTag.count("eth_getBlockByNumber", `["0x32",false]`) + upTag.count("eth_getBlockByNumber", `["0x10",false]`); n != 3 {
		t.Errorf("tag: %d upstream calls, want 3 (block 50 twice, block 16 once)", n)
	}
	if n := upDepth.count("eth_getBlockByNumber", `["0x32",false]`) + upDepth.count("eth_getBlockByNumber", `["0x10",false]`); n != 2 {
		t.Errorf("depth: %d upstream calls, want 2 (each block once)", n)
	}
}
