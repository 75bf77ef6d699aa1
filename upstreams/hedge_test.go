package upstreams

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

func TestQuantile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(100 - i) // unsorted: 100 … 1
	}
	for _, tc := range []struct {
		name string
		s    []int64
		q    float64
		want int64
	}{
		{"p90 of 1..100", hundred, 0.9, 90},
		{"p50 of 1..100", hundred, 0.5, 50},
		{"p99 of 1..100", hundred, 0.99, 99},
		{"one sample", []int64{7}, 0.9, 7},
		{"p90 of 8 samples is the largest", []int64{1, 2, 3, 4, 5, 6, 7, 8}, 0.9, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(append([]int64(nil), tc.s...), tc.q); got != tc.want {
				t.Errorf("quantile = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLatenciesWarmUp(t *testing.T) {
	l := latencies{q: 0.9}
	for i := range latencyMinSamples - 1 {
		l.observe(time.Duration(i+1) * time.Millisecond)
	}
	if got := l.estimate(); got != 0 {
		t.Fatalf("estimate after %d samples = %v, want 0 (unknown)", latencyMinSamples-1, got)
	}
	l.observe(8 * time.Millisecond)
	if got := l.estimate(); got != 8*time.Millisecond {
		t.Fatalf("estimate of 1..8 ms = %v, want 8ms", got)
	}
}

// TestLatenciesRecent: the estimate follows the latest window, not the whole history.
func TestLatenciesRecent(t *testing.T) {
	l := latencies{q: 0.9}
	for range 1000 {
		l.observe(100 * time.Millisecond)
	}
	if got := l.estimate(); got != 100*time.Millisecond {
		t.Fatalf("estimate = %v, want 100ms", got)
	}
	for range latencyWindow + 2*latencyEvery {
		l.observe(10 * time.Millisecond)
	}
	if got := l.estimate(); got != 10*time.Millisecond {
		t.Fatalf("estimate after a window of 10ms answers = %v, want 10ms", got)
	}
	// One slow answer in ten within the window: p90 stays at the fast ones, p99 sees it.
	l99 := latencies{q: 0.99}
	for i := range 1000 {
		d := 10 * time.Millisecond
		if i%10 == 0 {
			d = time.Second
		}
		l.observe(d)
		l99.observe(d)
	}
	if got := l.estimate(); got != 10*time.Millisecond {
		t.Errorf("p90 with a tenth slow = %v, want 10ms", got)
	}
	if got := l99.estimate(); got != time.Second {
		t.Errorf("p99 with a tenth slow = %v, want 1s", got)
	}
}

func TestHedgerBucket(t *testing.T) {
	m := newMetrics(nil)
	h := newHedger(HedgeConfig{Quantile: 0.9, MinDelay: 10 * time.Millisecond, MaxDelay: time.Second, MaxExtra: 0.1}, 2, m, "x")
	if h.take() {
		t.Fatal("a hedge before any read")
	}
	for range 25 {
		h.credit()
	}
	takes := 0
	for h.take() {
		takes++
	}
	if takes != 2 {
		t.Errorf("hedges after 25 reads at maxExtra 0.1 = %d, want 2", takes)
	}
	for range 10_000 {
		h.credit()
	}
	takes = 0
	for h.take() {
		takes++
	}
	if takes != hedgeBurst {
		t.Errorf("hedges saved up = %d, want the burst %d", takes, hedgeBurst)
	}
}

func TestHedgerDelay(t *testing.T) {
	m := newMetrics(nil)
	h := newHedger(HedgeConfig{Quantile: 0.9, MinDelay: 10 * time.Millisecond, MaxDelay: time.Second, MaxExtra: 0.1}, 3, m, "x")
	nodes := []*node{{bit: 1}, {bit: 2}, {bit: 4}}
	if got := h.delay(nodes[0]); got != time.Second {
		t.Errorf("delay of a node without answers = %v, want maxDelay", got)
	}
	for range 50 {
		h.observe(nodes[0], time.Millisecond)
		h.observe(nodes[1], 200*time.Millisecond)
		h.observe(nodes[2], 5*time.Second)
	}
	for i, want := range []time.Duration{10 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		if got := h.delay(nodes[i]); got != want {
			t.Errorf("node %d: delay = %v, want %v", i, got, want)
		}
	}
}

// hedgeEnv is two anvil nodes behind proxies, funded apart so that an answer of
// eth_getBalance tells which node gave it: "first", which the pool prefers for every read,
// and "second", which the pool picks only when the first is excluded (its hedges and
// failover): the second node is more than maxLag blocks behind.
type hedgeEnv struct {
	s             testSet
	p             *Pool
	first, second *nodeProxy
	firstBalance  string
	secondBalance string
}

const hedgeAddr = "0x00000000000000000000000000000000000000aa"

func newHedgeEnv(t *testing.T, maxExtra float64) *hedgeEnv {
	t.Helper()
	a, b := anvil.Start(t, 31337), anvil.Start(t, 31337)
	e := &hedgeEnv{first: newNodeProxy(t, a, 0), second: newNodeProxy(t, b, 0),
		firstBalance: `"0x1"`, secondBalance: `"0x2"`}
	for _, c := range []struct {
		n   *anvil.Node
		bal string
	}{{a, "0x1"}, {b, "0x2"}} {
		if _, err := c.n.Call("anvil_setBalance", hedgeAddr, c.bal); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Call("anvil_mine", "0x10"); err != nil {
		t.Fatal(err)
	}
	cfg := anvilConfig(e.first, e.second)
	cfg.Hedge = HedgeConfig{Enabled: true, Quantile: 0.9, MinDelay: 50 * time.Millisecond, MaxDelay: time.Second, MaxExtra: maxExtra}
	// Upstream batching on, with a small in-flight limit: concurrent reads queue and travel
	// in batches, and a canceled attempt leaves its batch.
	cfg.Batch = BatchConfig{Enabled: true, MaxInFlight: 2, MaxSize: 50}
	e.s = startSet(t, cfg, Deps{})
	e.p = e.s.anvilPool(t)
	wait.For(t, "the first node in rotation, the second lagging", func() bool {
		st := e.p.Nodes()
		return st[0].Healthy && st[1].Verified && st[1].Lag > *cfg.MaxLag
	})
	return e
}

func (e *hedgeEnv) balance(t *testing.T) string {
	t.Helper()
	res, err := e.p.Forward(context.Background(), "eth_getBalance", []byte(`["`+hedgeAddr+`","latest"]`))
	if err != nil {
		t.Fatalf("eth_getBalance: %v", err)
	}
	return string(res)
}

func (e *hedgeEnv) hedges(t *testing.T, outcome string) int {
	return int(e.s.metricValue(t, "web3gate_upstream_hedges_total", map[string]string{"chain": "anvil", "outcome": outcome}))
}

// TestHedgedReadsTakeTheFastNode: with the preferred node slowed (300 ms on every read), a
// read is hedged to the other node once the preferred node's p90 (from the fast reads
// before, at least minDelay 50 ms) has passed, within the cap: each hedge won gave the
// second node's answer, and every answer of the second node is a hedge won; the reads
// refused a hedge (capped) wait for the first node's; the second node sees exactly the
// hedges; the hedges never exceed maxExtra of the reads. (The reads that were not hedged
// raise the first node's p90, as its answers slow down; it is not asserted when that turns
// hedging off.)
func TestHedgedReadsTakeTheFastNode(t *testing.T) {
	const (
		warm     = 100
		slowN    = 20
		maxExtra = 0.25
	)
	e := newHedgeEnv(t, maxExtra)
	for i := range warm {
		if got := e.balance(t); got != e.firstBalance {
			t.Fatalf("warm-up read %d answered %s by the second node", i, got)
		}
	}
	// A fast read that a loaded machine stalled past 50 ms may have been hedged: count from here.
	won0, lost0, capped0 := e.hedges(t, "won"), e.hedges(t, "lost"), e.hedges(t, "capped")
	second0 := e.second.count("eth_getBalance")

	e.first.slow.Store(int64(300 * time.Millisecond))
	fromSecond := 0
	for range slowN {
		switch got := e.balance(t); got {
		case e.secondBalance:
			fromSecond++
		case e.firstBalance:
		default:
			t.Fatalf("balance %s is neither node's", got)
		}
	}
	won, lost, capped := e.hedges(t, "won")-won0, e.hedges(t, "lost")-lost0, e.hedges(t, "capped")-capped0
	if won == 0 || won != fromSecond {
		t.Errorf("hedges won = %d, answers of the second node = %d: want equal and > 0", won, fromSecond)
	}
	if won+lost+capped > slowN {
		t.Errorf("hedges won %d + lost %d + capped %d: more than one per read (%d)", won, lost, capped, slowN)
	}
	if capped == 0 {
		t.Errorf("no hedge capped: %d reads at most %v hedged, after %d", slowN, maxExtra, warm)
	}
	if total, limit := e.hedges(t, "won")+e.hedges(t, "lost"), int(maxExtra*(warm+slowN)); total > limit {
		t.Errorf("hedges = %d, over maxExtra of %d reads (%d)", total, warm+slowN, limit)
	}
	if got := e.second.count("eth_getBalance") - second0; got != won+lost {
		t.Errorf("the second node got %d slow-phase reads, want exactly the %d hedges", got, won+lost)
	}
	if got := e.first.count("eth_getBalance"); got != warm+slowN {
		t.Errorf("the first node got %d reads, want all %d", got, warm+slowN)
	}
}

// TestHedgedReadsConcurrent: concurrent hedged reads through the coalescer (8 readers, 2
// exchanges in flight per node: the others queue and go in batches) each get an answer of
// one node, whole (no answer written into a buffer that another read reuses); Close then
// waits for the canceled attempts, and TestMain's leak check finds none left.
func TestHedgedReadsConcurrent(t *testing.T) {
	e := newHedgeEnv(t, 1)
	for range 10 {
		e.balance(t)
	}
	e.first.slow.Store(int64(200 * time.Millisecond))
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		bad []string
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				res, err := e.p.Forward(context.Background(), "eth_getBalance", []byte(`["`+hedgeAddr+`","latest"]`))
				if err != nil || string(res) != e.firstBalance && string(res) != e.secondBalance {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("reader %d read %d: %s, %v", g, i, res, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("bad answers:\n%v", bad)
	}
	if e.hedges(t, "won") == 0 {
		t.Error("no hedge won against a node 200ms slow")
	}
	if e.s.metricValue(t, "web3gate_upstream_batches_total", map[string]string{"chain": "anvil", "node": "anvil-0"}) == 0 {
		t.Error("no batch to the first node: the reads did not go through the coalescer's queue")
	}
	e.s.Close()
	if n := e.p.hedge.bufs.Load(); n != 0 {
		t.Errorf("%d answer buffers of hedges not returned after Close", n)
	}
}

// TestNoHedgeForSendRawTransaction: a transaction broadcast to the slow node is never sent to
// the other one, however long the node takes.
func TestNoHedgeForSendRawTransaction(t *testing.T) {
	e := newHedgeEnv(t, 1)
	for range 10 {
		e.balance(t)
	}
	e.first.slow.Store(int64(200 * time.Millisecond))
	for range 3 {
		_, err := e.p.Forward(context.Background(), "eth_sendRawTransaction", []byte(`["0x00"]`))
		asError[*jsonrpc.Error](t, err) // anvil refuses the bytes: the node's answer
	}
	if got := e.second.count("eth_sendRawTransaction"); got != 0 {
		t.Errorf("the second node got %d eth_sendRawTransaction", got)
	}
	if got := e.first.count("eth_sendRawTransaction"); got != 3 {
		t.Errorf("the first node got %d eth_sendRawTransaction, want 3", got)
	}
	if got := e.hedges(t, "won") + e.hedges(t, "lost") + e.hedges(t, "capped"); got != 0 {
		t.Errorf("%d hedges counted", got)
	}
}

// TestNoHedgeInOneNodePool: a pool of one slow node never hedges, nor counts a hedge.
func TestNoHedgeInOneNodePool(t *testing.T) {
	a := anvil.Start(t, 31337)
	px := newNodeProxy(t, a, 0)
	cfg := anvilConfig(px)
	cfg.Hedge = HedgeConfig{Enabled: true, Quantile: 0.9, MinDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxExtra: 1}
	s := startSet(t, cfg, Deps{})
	p := s.anvilPool(t)
	wait.For(t, "the node in rotation", p.healthy)
	if p.hedge != nil {
		t.Fatal("a one-node pool has a hedger")
	}
	px.slow.Store(int64(50 * time.Millisecond))
	for range 5 {
		if _, err := p.Forward(context.Background(), "eth_getBalance", []byte(`["`+hedgeAddr+`","latest"]`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := px.count("eth_getBalance"); got != 5 {
		t.Errorf("the node got %d reads, want 5", got)
	}
	for _, o := range []string{"won", "lost", "capped"} {
		if got := s.metricValue(t, "web3gate_upstream_hedges_total", map[string]string{"chain": "anvil", "outcome": o}); got != 0 {
			t.Errorf("hedges %s = %v", o, got)
		}
	}
}

// TestHedgeErrorDoesNotBeatTheAnswer: the second node's JSON-RPC error (here its contract
// reverts) comes first but does not end the wait for the slow first node, whose result is
// the answer; the hedge counts as lost.
func TestHedgeErrorDoesNotBeatTheAnswer(t *testing.T) {
	e := newHedgeEnv(t, 1)
	const contract = "0x00000000000000000000000000000000000020aa"
	// First node: returns the word 1. Second node: reverts.
	if _, err := e.first.node.Call("anvil_setCode", contract, "0x600160005260206000f3"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.second.node.Call("anvil_setCode", contract, "0x60006000fd"); err != nil {
		t.Fatal(err)
	}
	call := []byte(`[{"to":"` + contract + `","data":"0x"},"latest"]`)
	for range 10 {
		if _, err := e.p.Forward(context.Background(), "eth_call", call); err != nil {
			t.Fatal(err)
		}
	}
	won0, lost0 := e.hedges(t, "won"), e.hedges(t, "lost")
	e.first.slow.Store(int64(300 * time.Millisecond))
	res, err := e.p.Forward(context.Background(), "eth_call", call)
	if err != nil {
		t.Fatalf("eth_call: %v (the second node's revert won)", err)
	}
	if want := `"0x0000000000000000000000000000000000000000000000000000000000000001"`; string(res) != want {
		t.Errorf("eth_call = %s, want %s", res, want)
	}
	if won, lost := e.hedges(t, "won")-won0, e.hedges(t, "lost")-lost0; won != 0 || lost != 1 {
		t.Errorf("hedges won %d, lost %d; want 0, 1", won, lost)
	}
	if got := e.second.count("eth_call"); got != 1 {
		t.Errorf("the second node got %d eth_call, want the one hedge", got)
	}
}
