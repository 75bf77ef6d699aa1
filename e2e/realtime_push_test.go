package e2e

import (
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testproc"
)

// Heads pushed by the node: the feed subscribes to anvil's newHeads over ws:// (anvil serves
// it on its HTTP port), through a TCP proxy the test cuts to kill the socket alone.

// cutProxy forwards TCP connections from its own loopback address to target until cut,
// which closes the listener and every connection; restore listens again on the same
// address.
type cutProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startCutProxy starts a proxy to target (host:port), stopped at the test's end.
func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			p.wg.Go(func() { pipe(up, c) })
			p.wg.Go(func() { pipe(c, up) })
		}
	})
}

// cut closes the listener and every connection: the node's socket is gone, and new ones
// are refused until restore.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the proxy's address.
func (p *cutProxy) restore() {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the address may take a moment to be free again
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// pushConfig is realtimeConfig for one anvil node (url) whose heads come over wsURLs, with
// reconnections at most 500ms apart.
func pushConfig(url string, wsURLs ...string) string {
	cfg := realtimeConfig("feeds: {push: {minBackoff: 50ms, maxBackoff: 500ms}}\n", url)
	return strings.Replace(cfg, "      urls: ["+url+"]", "      urls: ["+url+"]\n      wsUrls: ["+strings.Join(wsURLs, ", ")+"]", 1)
}

// waitMetric waits (15 s) until the sum of name's samples with labels is want.
func waitMetric(t *testing.T, g *gateway, name string, want float64, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := metricSum(t, g, name, labels...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v after 15s, want %v", name, labels, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHead waits (15 s) until w has seen block n.
func waitHead(t *testing.T, w *gethWatcher, n uint64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := w.seen()
		if len(s.errs) > 0 {
			t.Fatalf("%s: %v", w.name(), s.errs)
		}
		if slices.ContainsFunc(s.blocks, func(b seenBlock) bool { return b.Number >= n }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: block %d not delivered within 15s (saw %s)", w.name(), n, ranges(numbers(s.blocks)))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func numbers(bs []seenBlock) []uint64 {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		out[i] = b.Number
	}
	return out
}

// checkExactly fails unless blocks are want, each once, in order, and nothing before.
func checkExactly(t *testing.T, name string, blocks []seenBlock, want []nodeBlock) {
	t.Helper()
	wantNums := make([]uint64, len(want))
	for i, b := range want {
		wantNums[i] = uint64(b.Number)
	}
	got := numbers(blocks)
	if !slices.Equal(got, wantNums) {
		t.Fatalf("%s: heads %s, want %d..%d once each in order, nothing before (%s)", name, ranges(got), wantNums[0], wantNums[len(wantNums)-1], blockProblems(got, wantNums))
	}
	for i, b := range blocks {
		if b.Hash != want[i].Hash {
			t.Errorf("%s: head %d has hash %s, the chain's is %s", name, b.Number, b.Hash, want[i].Hash)
		}
	}
}

const feedCalls = "web3gate_feed_upstream_calls_total"

// TestRealtimePush: with anvil's ws:// configured (through a proxy), a newHeads subscriber
// gets every block of 100 once, in order, while the push is up (40 blocks), while the
// node's socket is cut and the feed polls (20 blocks, some mined back to back), and after
// the socket is back (40 blocks); with the push up, the feed's upstream calls grow by at
// most one per block (the block's eth_getLogs: the subscriber also wants logs). A second
// subscriber that subscribes while the push is up gets only the blocks mined after its
// eth_subscribe answer. The first of the two socket URLs refuses connections: the feed
// fails over to the second, at the start and after the cut.
func TestRealtimePush(t *testing.T) {
	a := realtimeAnvil(t)
	d := newChainDriver(t, a)
	p := startCutProxy(t, strings.TrimPrefix(a.URL, "http://"))
	// The first socket URL refuses connections: the feed moves to the next.
	g := startGateway(t, pushConfig(a.URL, "ws://"+testproc.FreeAddr(t), "ws://"+p.addr))
	waitReady(t, g)
	creds := map[string]string{"X-API-Key": "e2e", "Authorization": "Bearer e2e-token"}
	// newHeads and logs (of an address without any): the feed reads each block's logs.
	w := watchGeth(t, "subscriber", wsURL(g, "/v1/web3/mainnet"), creds, true, freshAddress())
	waitMetric(t, g, "web3gate_feed_push_up", 1)

	var mined []nodeBlock
	// pushed mines n blocks one at a time, each delivered before the next, and checks the
	// feed's upstream calls over them.
	pushed := func(n int) {
		t.Helper()
		before := metricSum(t, g, feedCalls)
		lagPolls := metricSum(t, g, "web3gate_feed_push_lag_polls_total")
		for range n {
			b := d.mine(0)
			mined = append(mined, b)
			waitHead(t, w, uint64(b.Number))
		}
		calls := metricSum(t, g, feedCalls) - before
		t.Logf("push up: %d blocks, %v feed upstream calls (%v by method), %v lag polls", n, calls,
			metricValues(t, g, feedCalls), metricSum(t, g, "web3gate_feed_push_lag_polls_total")-lagPolls)
		if calls > float64(n) {
			t.Errorf("push up: %v feed upstream calls for %d blocks, want at most one per block", calls, n)
		}
		if up := metricSum(t, g, "web3gate_feed_push_up"); up != 1 {
			t.Errorf("web3gate_feed_push_up = %v after the blocks, want 1", up)
		}
	}

	pushed(20)
	// A second subscriber, while the push is up, gets only what is mined after it.
	late := watchGeth(t, "late subscriber", wsURL(g, "/v1/web3/mainnet"), creds, true, common.Address{})
	lateFrom := len(mined)
	pushed(20)

	p.cut()
	waitMetric(t, g, "web3gate_feed_push_up", 0)
	for i := range 20 {
		mined = append(mined, d.mine(0))
		if i%3 != 2 { // some back to back: one poll may find two
			waitHead(t, w, uint64(mined[len(mined)-1].Number))
		}
	}
	waitHead(t, w, uint64(mined[len(mined)-1].Number))
	p.restore()
	waitMetric(t, g, "web3gate_feed_push_up", 1)
	pushed(40)

	time.Sleep(time.Second) // anything sent twice arrives within it
	checkExactly(t, w.name(), w.stop(t).blocks, mined)
	checkExactly(t, late.name(), late.stop(t).blocks, mined[lateFrom:])
	t.Logf("pushed heads %v, lag polls %v", metricSum(t, g, "web3gate_feed_pushed_heads_total"),
		metricSum(t, g, "web3gate_feed_push_lag_polls_total"))
}

// TestRealtimeSubscribeAfter: the first newHeads subscriber of an idle feed gets only the
// blocks mined after its eth_subscribe answer, even when the upstream pool's head polling
// has not seen the block mined just before (upstreams.pollInterval 1h here: the pool
// knows only the head at startup).
func TestRealtimeSubscribeAfter(t *testing.T) {
	a := realtimeAnvil(t)
	d := newChainDriver(t, a)
	cfg := strings.Replace(realtimeConfig("", a.URL), "pollInterval: 200ms", "pollInterval: 1h", 1)
	g := startGateway(t, cfg)
	waitReady(t, g)
	for range 3 {
		d.mine(0) // the pool's head stays below these
	}
	creds := map[string]string{"X-API-Key": "e2e", "Authorization": "Bearer e2e-token"}
	w := watchGeth(t, "subscriber", wsURL(g, "/v1/web3/mainnet"), creds, true, common.Address{})
	var mined []nodeBlock
	for range 3 {
		mined = append(mined, d.mine(0))
		waitHead(t, w, uint64(mined[len(mined)-1].Number))
	}
	time.Sleep(500 * time.Millisecond)
	checkExactly(t, w.name(), w.stop(t).blocks, mined)
}
