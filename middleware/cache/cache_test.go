package cache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// counting is a terminal handler answering every call with result, counting the calls.
type counting struct {
	result string
	n      atomic.Int32
}

func (h *counting) Serve(*proxy.Call) (*proxy.Response, error) {
	h.n.Add(1)
	return &proxy.Response{Result: []byte(h.result)}, nil
}

func newStage(t *testing.T, head uint64) *Stage {
	cfg := Config{Enabled: true, Local: true, Coalesce: true}
	cfg.SetDefaults()
	s, err := New(cfg, Deps{Registry: prometheus.NewRegistry(), Head: func(uint64) uint64 { return head }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func call(method, params string) *proxy.Call {
	return &proxy.Call{ChainID: 1, Request: jsonrpc.Request{ID: []byte("1"), Method: method, Params: []byte(params)}}
}

func TestReceiptCachingFollowsFinality(t *testing.T) {
	receipt := func(block uint64) string {
		return fmt.Sprintf(`{"blockHash":"0xabc","blockNumber":"0x%x","status":"0x1"}`, block)
	}
	for _, tc := range []struct {
		name    string
		result  string
		head    uint64
		sleep   time.Duration
		upcalls int32
	}{
		{"final: cached", receipt(100), 200, 0, 1},
		{"recent: cached briefly", receipt(195), 200, 0, 1},
		{"recent: expired after the ttl", receipt(195), 200, 2500 * time.Millisecond, 2},
		{"null: never cached", "null", 200, 0, 2},
		{"pending (no block hash): never cached", `{"blockHash":null,"blockNumber":null}`, 200, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStage(t, tc.head)
			h := &counting{result: tc.result}
			chain := proxy.Compile(h, s)
			c := call("eth_getTransactionReceipt", `["0x0000000000000000000000000000000000000000000000000000000000000001"]`)
			if _, err := chain.Serve(c); err != nil {
				t.Fatal(err)
			}
			s.Wait()
			time.Sleep(tc.sleep)
			resp, err := chain.Serve(call("eth_getTransactionReceipt", `["0x0000000000000000000000000000000000000000000000000000000000000001"]`))
			if err != nil || string(resp.Result) != tc.result {
				t.Fatalf("second answer %v %v", resp, err)
			}
			if got := h.n.Load(); got != tc.upcalls {
				t.Fatalf("%d upstream calls, want %d", got, tc.upcalls)
			}
		})
	}
}

func TestOnlyAllowListedMethodsAreCached(t *testing.T) {
	s := newStage(t, 0)
	h := &counting{result: `"0x1"`}
	chain := proxy.Compile(h, s)
	for range 3 {
		if _, err := chain.Serve(call("eth_estimateGas", `[{"to":"0x00000000000000000000000000000000000000aa"},"latest"]`)); err != nil {
			t.Fatal(err)
		}
		s.Wait()
	}
	if got := h.n.Load(); got != 3 {
		t.Fatalf("eth_estimateGas reached the upstream %d times, want 3", got)
	}
}

func TestCacheKeySeparatesChainsAndParams(t *testing.T) {
	s := newStage(t, 0)
	h := &counting{result: `{"hash":"0x1"}`}
	chain := proxy.Compile(h, s)
	for _, c := range []*proxy.Call{
		call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",false]`),
		call("eth_getBlockByHash", `["0x0000000000000000000000000000000000000000000000000000000000000001",true]`),
		{ChainID: 2, Request: jsonrpc.Request{Method: "eth_getBlockByHash", Params: []byte(`["0x0000000000000000000000000000000000000000000000000000000000000001",false]`)}},
	} {
		if _, err := chain.Serve(c); err != nil {
			t.Fatal(err)
		}
		s.Wait()
	}
	if got := h.n.Load(); got != 3 {
		t.Fatalf("%d upstream calls, want 3 distinct entries", got)
	}
}

// byMethod answers each method with its result, counting the calls per method.
type byMethod struct {
	results map[string]string
	mu      sync.Mutex
	n       map[string]int
}

func (h *byMethod) Serve(c *proxy.Call) (*proxy.Response, error) {
	h.mu.Lock()
	h.n[c.Method()]++
	h.mu.Unlock()
	return &proxy.Response{Result: []byte(h.results[c.Method()])}, nil
}

func (h *byMethod) count(m string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[m]
}

// TestNoHeadAnswersBehindWhatAClientSaw: once an answer showed block 101 (eth_blockNumber, a
// receipt) while the finality poll still says 100, latest reads are not served from the
// cache nor stored until the poll sees 101; final ones still are.
func TestNoHeadAnswersBehindWhatAClientSaw(t *testing.T) {
	for _, shown := range []struct {
		method, params, result string
		coalesce               bool
	}{
		{"eth_blockNumber", `[]`, `"0x65"`, true},
		{"eth_blockNumber", `[]`, `"0x65"`, false},
		{"eth_getTransactionReceipt", `["` + hash1 + `"]`, `{"blockHash":"0xab","blockNumber":"0x65"}`, true},
	} {
		t.Run(fmt.Sprintf("%s coalesce %v", shown.method, shown.coalesce), func(t *testing.T) {
			var head atomic.Uint64
			head.Store(100)
			cfg := Config{Enabled: true, Local: true, Coalesce: shown.coalesce}
			cfg.SetDefaults()
			s, err := New(cfg, Deps{Registry: prometheus.NewRegistry(), Finality: func(uint64) Finality {
				h := head.Load()
				return Finality{Known: true, Head: h, HeadHash: fmt.Sprintf("0x%064x", h), Finalized: h - 12}
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			h := &byMethod{n: map[string]int{}, results: map[string]string{
				"eth_getBalance": `"0x1"`, shown.method: shown.result,
			}}
			chain := proxy.Compile(h, s)
			serve := func(m, p string) {
				t.Helper()
				if _, err := chain.Serve(call(m, p)); err != nil {
					t.Fatal(err)
				}
				s.Wait()
			}
			latest, final := `["`+addrLower+`","latest"]`, `["`+addrLower+`","0x10"]`
			serve(shown.method, shown.params)
			for range 2 {
				serve("eth_getBalance", latest)
				serve("eth_getBalance", final)
			}
			if n := h.count("eth_getBalance"); n != 3 {
				t.Fatalf("%d upstream calls, want 3: latest twice (the poll is behind), the final one once", n)
			}
			head.Store(101)
			for range 2 {
				serve("eth_getBalance", latest)
			}
			if n := h.count("eth_getBalance"); n != 4 {
				t.Fatalf("%d upstream calls, want 4: latest cached once the poll caught up", n)
			}
		})
	}
}

// TestServeStoresByClass: through the stage, what keep decides is what is stored: answers
// stored (one upstream call for two) or not (two).
func TestServeStoresByClass(t *testing.T) {
	for _, tc := range []struct {
		name, method, params, result string
		upcalls                      int32
	}{
		{"final logs", "eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x10"}]`, `[]`, 1},
		{"logs by hash", "eth_getLogs", `[{"blockHash":"` + hash1 + `"}]`, `[{"logIndex":"0x0"}]`, 1},
		{"empty logs by hash", "eth_getLogs", `[{"blockHash":"` + hash1 + `"}]`, `[]`, 2},
		{"empty logs past the head", "eth_getLogs", `[{"fromBlock":"0x60","toBlock":"0x70"}]`, `[]`, 2},
		{"latest balance", "eth_getBalance", `["` + addrLower + `","latest"]`, `"0x1"`, 1},
		{"pending balance", "eth_getBalance", `["` + addrLower + `","pending"]`, `"0x1"`, 2},
		{"null block", "eth_getBlockByNumber", `["0x10",false]`, `null`, 2},
		{"recent receipt", "eth_getTransactionReceipt", `["` + hash1 + `"]`, `{"blockHash":"0xab","blockNumber":"0x63"}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Enabled: true, Local: true, Coalesce: true}
			cfg.SetDefaults()
			s, err := New(cfg, Deps{Registry: prometheus.NewRegistry(), Finality: func(uint64) Finality { return testFinality }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			h := &counting{result: tc.result}
			chain := proxy.Compile(h, s)
			for range 2 {
				if _, err := chain.Serve(call(tc.method, tc.params)); err != nil {
					t.Fatal(err)
				}
				s.Wait()
			}
			if got := h.n.Load(); got != tc.upcalls {
				t.Fatalf("%d upstream calls, want %d", got, tc.upcalls)
			}
		})
	}
}

// gated answers each call once gate is closed, with the result of its params as sent.
type gated struct {
	gate, entered chan struct{}
	n             atomic.Int32
	results       map[string]string
}

func (g *gated) Serve(c *proxy.Call) (*proxy.Response, error) {
	g.n.Add(1)
	g.entered <- struct{}{}
	<-g.gate
	return &proxy.Response{Result: []byte(g.results[string(c.Request.Params)])}, nil
}

// TestCoalescingKeepsSpellingsApart: two spellings of one call in flight at once each get
// their own upstream request (a node may answer one with an error), and the answer stored
// serves both afterwards.
func TestCoalescingKeepsSpellingsApart(t *testing.T) {
	cfg := Config{Enabled: true, Local: true, Coalesce: true}
	cfg.SetDefaults()
	s, err := New(cfg, Deps{Registry: prometheus.NewRegistry(), Finality: func(uint64) Finality { return testFinality }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	a, b := `["`+addrLower+`","0x10"]`, `["`+addrCheck+`","0x010"]`
	g := &gated{gate: make(chan struct{}), entered: make(chan struct{}, 2), results: map[string]string{a: `"0x1"`, b: `"0x1"`}}
	chain := proxy.Compile(g, s)
	var wg sync.WaitGroup
	for _, p := range []string{a, b} {
		wg.Go(func() {
			if _, err := chain.Serve(call("eth_getBalance", p)); err != nil {
				t.Error(err)
			}
		})
	}
	for range 2 { // both reach the upstream: neither waits for the other
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			close(g.gate)
			t.Fatal("one spelling waited for the other's upstream request")
		}
	}
	close(g.gate)
	wg.Wait()
	s.Wait()
	for _, p := range []string{a, b} {
		if _, err := chain.Serve(call("eth_getBalance", p)); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.n.Load(); n != 2 {
		t.Fatalf("%d upstream calls, want 2", n)
	}
}
