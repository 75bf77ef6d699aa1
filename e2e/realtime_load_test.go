package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/fasthttp/websocket"
	"golang.org/x/sync/errgroup"

	"github.com/web3gate/web3gate/contracts"
)

// Many sockets and a slow one: raw WebSocket clients (fasthttp/websocket, gorilla's client)
// subscribed to newHeads and logs, against the binary.

// socket is a raw WebSocket client of web3gate that subscribed to some kinds and records
// what it is given.
type socket struct {
	conn  *websocket.Conn
	kinds []string          // the kind of each subscribe request, by request id - 1
	subs  map[string]string // subscription id → kind, once answered

	last     atomic.Uint64 // the highest head number given
	messages atomic.Int64  // every message read
	done     chan struct{} // closed when reading has ended (err set)

	mu    sync.Mutex
	heads []uint64
	logs  int
	errs  []string
	err   error // what ended the reading
}

// socketDialer dials web3gate's sockets; rcvBuf > 0 sets SO_RCVBUF of the connection before
// it connects (a small receive window, so that a client that stops reading fills the
// server's socket quickly).
func socketDialer(rcvBuf int) *websocket.Dialer {
	nd := &net.Dialer{Timeout: 10 * time.Second}
	if rcvBuf > 0 {
		nd.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = setRcvBuf(fd, rcvBuf)
			})
			return errors.Join(err, serr)
		}
	}
	return &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 10 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 4096}
}

// openSocket dials url and subscribes: one eth_subscribe per element of subs (each a JSON
// params array, e.g. `["newHeads"]`), and reads until every one is answered. It does not
// read further: start does.
func openSocket(d *websocket.Dialer, url string, subs ...string) (*socket, error) {
	conn, resp, err := d.Dial(url, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (HTTP %d)", url, err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	s := &socket{conn: conn, subs: map[string]string{}, done: make(chan struct{})}
	for i, params := range subs {
		var p []json.RawMessage
		if err := json.Unmarshal([]byte(params), &p); err != nil || len(p) == 0 {
			conn.Close()
			return nil, fmt.Errorf("subscription params %s: %v", params, err)
		}
		var kind string
		_ = json.Unmarshal(p[0], &kind)
		s.kinds = append(s.kinds, kind)
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_subscribe","params":%s}`, i+1, params)
		if err := conn.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("eth_subscribe %s: %w", params, err)
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for len(s.subs) < len(subs) {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("eth_subscribe answers: %w", err)
		}
		if err := s.handle(msg); err != nil {
			conn.Close()
			return nil, err
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	return s, nil
}

// handle takes one message: a subscribe answer or a notification.
func (s *socket) handle(msg []byte) error {
	s.messages.Add(1)
	var m struct {
		ID     *int            `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Method string          `json:"method"`
		Params struct {
			Subscription string          `json:"subscription"`
			Result       json.RawMessage `json:"result"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("message %.200s: %w", msg, err)
	}
	if m.ID != nil {
		var id string
		if len(m.Error) > 0 || *m.ID < 1 || *m.ID > len(s.kinds) || json.Unmarshal(m.Result, &id) != nil {
			return fmt.Errorf("eth_subscribe answer %.300s", msg)
		}
		s.mu.Lock()
		s.subs[id] = s.kinds[*m.ID-1]
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kind, ok := s.subs[m.Params.Subscription]
	if m.Method != "eth_subscription" || !ok {
		return fmt.Errorf("unexpected message %.300s", msg)
	}
	switch kind {
	case "newHeads":
		var h struct {
			Number hexutil.Uint64 `json:"number"`
		}
		if err := json.Unmarshal(m.Params.Result, &h); err != nil {
			return fmt.Errorf("newHeads notification %.300s: %w", msg, err)
		}
		s.heads = append(s.heads, uint64(h.Number))
		if uint64(h.Number) > s.last.Load() {
			s.last.Store(uint64(h.Number))
		}
	case "logs":
		s.logs++
	}
	return nil
}

// start reads (and handles) messages until the connection ends.
func (s *socket) start() {
	go func() {
		defer close(s.done)
		for {
			_, msg, err := s.conn.ReadMessage()
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			if err := s.handle(msg); err != nil {
				s.mu.Lock()
				s.errs = append(s.errs, err.Error())
				s.mu.Unlock()
			}
		}
	}()
}

// snapshot is what s has been given so far.
func (s *socket) snapshot() (heads []uint64, logs int, errs []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.heads...), s.logs, append([]string(nil), s.errs...), s.err
}

// waitHeads waits (20 s) until every socket has been given head n, or has ended.
func waitHeads(t *testing.T, socks []*socket, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range socks {
		for s.last.Load() < n {
			select {
			case <-s.done:
				_, _, _, err := s.snapshot()
				t.Fatalf("a socket ended before head %d: %v", n, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("a socket was not given head %d within 20s (its last: %d)", n, s.last.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// checkHeadNumbers fails unless heads are first..last once each in order, where first may be
// preceded by first-1 (the head when the socket subscribed).
func checkHeadNumbers(t *testing.T, name string, heads []uint64, first, last uint64) bool {
	t.Helper()
	if len(heads) > 0 && heads[0] == first-1 {
		heads = heads[1:]
	}
	want := make([]uint64, 0, last-first+1)
	for n := first; n <= last; n++ {
		want = append(want, n)
	}
	if !slices.Equal(heads, want) {
		t.Errorf("%s: heads %s, want %d..%d once each in order (%s)", name, ranges(heads), first, last, blockProblems(heads, want))
		return false
	}
	return true
}

// byLabel sums metric samples (as metricValues gives them) by the value of their label key.
func byLabel(samples map[string]float64, key string) map[string]float64 {
	re := regexp.MustCompile(key + `="([^"]*)"`)
	out := map[string]float64{}
	for set, v := range samples {
		if m := re.FindStringSubmatch(set); m != nil {
			out[m[1]] += v
		}
	}
	return out
}

// upstreamCalls is the calls web3gate has made to chain "anvil" so far by method: all of them
// (web3gate_upstream_requests_total, the pool's own health checks included) and the feed's
// (web3gate_feed_upstream_calls_total).
func upstreamCalls(t *testing.T, g *gateway) (all, feed map[string]float64) {
	t.Helper()
	all = map[string]float64{}
	for set, v := range metricValues(t, g, "web3gate_upstream_requests_total") {
		if strings.Contains(set, `chain="anvil"`) {
			all[set] = v
		}
	}
	return byLabel(all, "method"), byLabel(metricValues(t, g, "web3gate_feed_upstream_calls_total"), "method")
}

// minus is a − b by key.
func minus(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// TestRealtimeOneFeed subscribes one socket, then 1,000, to newHeads on one chain and mines 10
// blocks with each, one a second: every socket is given every head, once, in order, and web3gate's upstream
// calls per block stay what they were with one socket (one feed per chain, not one poll per
// subscriber).
func TestRealtimeOneFeed(t *testing.T) {
	const (
		sockets   = 1000
		k         = 10
		blockSlot = time.Second
	)
	node := realtimeAnvil(t)
	d := newChainDriver(t, node)
	d.mine(0)
	g := startGateway(t, realtimeConfig(`
server:
  maxConnsPerIP: 4096
  websocket: {maxConnsPerClient: 2000, maxConnsPerPrincipal: 2000, maxConnsPerAddress: 2000}
`, node.URL))
	waitReady(t, g)
	url := wsURL(g, "/v1/web3/mainnet/e2e")
	dialer := socketDialer(0)

	// phase mines k blocks, one a second (each once every socket has the one before): a
	// phase lasts the same whatever the number of sockets, so that the polls that run on a
	// clock (the pool's health checks, the feed's) weigh the same in both. It returns the
	// upstream calls the phase took by method, and its first block.
	phase := func(socks []*socket) (all, feed map[string]float64, first uint64) {
		all0, feed0 := upstreamCalls(t, g)
		for i := range k {
			slot := time.Now()
			b := d.mine(0)
			if i == 0 {
				first = uint64(b.Number)
			}
			waitHeads(t, socks, uint64(b.Number))
			if took := time.Since(slot); took > blockSlot {
				t.Logf("block %d reached %d sockets in %v, more than its slot", b.Number, len(socks), took)
			}
			time.Sleep(blockSlot - time.Since(slot))
		}
		all1, feed1 := upstreamCalls(t, g)
		return minus(all1, all0), minus(feed1, feed0), first
	}

	one, err := openSocket(dialer, url, `["newHeads"]`)
	if err != nil {
		t.Fatal(err)
	}
	one.start()
	t.Cleanup(func() { one.conn.Close() })
	all1, feed1, first1 := phase([]*socket{one})

	socks := make([]*socket, sockets)
	socks[0] = one
	var eg errgroup.Group
	eg.SetLimit(32)
	for i := 1; i < sockets; i++ {
		eg.Go(func() error {
			s, err := openSocket(dialer, url, `["newHeads"]`)
			if err != nil {
				return fmt.Errorf("socket %d: %w", i, err)
			}
			s.start()
			socks[i] = s
			return nil
		})
	}
	err = eg.Wait()
	t.Cleanup(func() {
		for _, s := range socks {
			if s != nil {
				s.conn.Close()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := metricSum(t, g, "web3gate_websocket_connections"); c != sockets {
		t.Errorf("web3gate_websocket_connections %v, want %d", c, sockets)
	}
	if c := metricSum(t, g, "web3gate_websocket_subscriptions", `kind="newHeads"`); c != sockets {
		t.Errorf(`web3gate_websocket_subscriptions{kind="newHeads"} %v, want %d`, c, sockets)
	}
	all2, feed2, first2 := phase(socks)
	last := first2 + k - 1

	bad := 0
	for i, s := range socks {
		heads, _, errs, err := s.snapshot()
		from := first2
		if i == 0 {
			from = first1
		}
		ok := checkHeadNumbers(t, fmt.Sprintf("socket %d", i), heads, from, last)
		if len(errs) > 0 || err != nil {
			t.Errorf("socket %d: errors %v, ended: %v", i, errs, err)
			ok = false
		}
		if !ok {
			if bad++; bad == 5 {
				t.Fatalf("stopping after 5 sockets in error")
			}
		}
	}

	t.Logf("upstream calls for %d blocks with 1 socket: all %v (%v), feed %v (%v)", k, all1, total(all1), feed1, total(feed1))
	t.Logf("upstream calls for %d blocks with %d sockets: all %v (%v), feed %v (%v)", k, sockets, all2, total(all2), feed2, total(feed2))
	if total(feed1) == 0 {
		t.Errorf("web3gate_feed_upstream_calls_total did not move with one subscriber: %v", metricValues(t, g, "web3gate_feed_upstream_calls_total"))
	}
	// Per block, the same calls with 1,000 sockets as with 1 (time-driven polls may vary: the
	// bound is twice plus one per block, where one call per socket would be 1,000 per block).
	for _, m := range []struct {
		name     string
		one, all map[string]float64
	}{{"all", all1, all2}, {"feed", feed1, feed2}} {
		for method, n := range m.all {
			if n > 2*m.one[method]+k {
				t.Errorf("%s upstream calls of %s: %v for %d blocks with %d sockets, %v with 1", m.name, method, n, k, sockets, m.one[method])
			}
		}
	}
}

// TestRealtimeSlowConsumer has one socket subscribe to newHeads and to the logs of a contract
// that emits 40 logs of about 7 KB a block, then stop reading (with a 4 KB receive buffer),
// while four others keep reading (three newHeads, one newHeads and the logs), with
// server.websocket.queueSize 64. After a warm-up of 20 blocks (the feed's history, 16 blocks
// here, full), blocks are mined until web3gate drops the slow socket: it is closed (with
// 1008, when the close frame can still reach it: behind a full socket it cannot), counted in
// web3gate_websocket_dropped_total, and the others are given every block and every log.
// web3gate's resident memory grows by less than 32 MiB from the slow socket's start to two
// blocks after its drop (the race-enabled binary; one full queue is 64 messages of about
// 7 KB, and what the socket could not take stays in the kernel's socket buffers, 2 to 3 MB
// here; the growth measured: docs/performance.md, "Notes from the code", e2e).
func TestRealtimeSlowConsumer(t *testing.T) {
	const (
		logsPerBlock = 40
		idsPerLog    = 50 // a TransferBatch log of 50 ids: about 7 KB as JSON
		queueSize    = 64
		warmUp       = 40
		maxBlocks    = 200
		rssBound     = 32 << 20
	)
	node := realtimeAnvil(t)
	d := newChainDriver(t, node)
	emitterC := contracts.MustLoad("TransferEmitter")
	emitter := d.deploy(emitterC)
	g := startGateway(t, realtimeConfig(fmt.Sprintf(`
server:
  websocket: {queueSize: %d}
feeds: {history: 16}
`, queueSize), node.URL))
	waitReady(t, g)
	url := wsURL(g, "/v1/web3/mainnet/e2e")
	logsSub := fmt.Sprintf(`["logs",{"address":"%s"}]`, emitter.Hex())

	var fast []*socket
	for i := range 4 {
		subs := []string{`["newHeads"]`}
		if i == 3 {
			subs = append(subs, logsSub)
		}
		s, err := openSocket(socketDialer(0), url, subs...)
		if err != nil {
			t.Fatal(err)
		}
		s.start()
		t.Cleanup(func() { s.conn.Close() })
		fast = append(fast, s)
	}
	var first, last uint64
	block := func(i int) {
		t.Helper()
		data, err := emitterC.Calldata("batch1155", big.NewInt(int64(i*logsPerBlock*idsPerLog)), big.NewInt(logsPerBlock), big.NewInt(idsPerLog), big.NewInt(7))
		if err != nil {
			t.Fatal(err)
		}
		d.send(&emitter, data, 10_000_000)
		b := d.mine(0)
		if first == 0 {
			first = uint64(b.Number)
		}
		last = uint64(b.Number)
		waitHeads(t, fast, last)
	}
	// Warm-up: the feed's history (16 blocks) full and web3gate's heap grown to its steady
	// size, so that what the slow socket adds to the resident memory is what is measured
	// (after 20 blocks the heap still grew by 17 MiB over the next 14 without a slow socket;
	// after 40, by 2 MiB).
	for i := range warmUp {
		block(i)
	}

	slow, err := openSocket(socketDialer(4096), url, `["newHeads"]`, logsSub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.conn.Close() })
	slowFirst := last + 1
	rss0 := rss(t, g)
	maxRSS := rss0
	dropped := 0
	for i := warmUp; i < warmUp+maxBlocks && dropped < 3; i++ {
		block(i)
		maxRSS = max(maxRSS, rss(t, g))
		if dropped > 0 || metricSum(t, g, "web3gate_websocket_dropped_total") > 0 {
			dropped++ // and two more blocks for the others
		}
	}
	if dropped == 0 {
		t.Fatalf("the slow socket was not dropped after %d blocks (%d messages read by it, before it stopped reading)", last-slowFirst+1, slow.messages.Load())
	}
	t.Logf("the slow socket was dropped within %d blocks of %d logs", last-slowFirst+1-2, logsPerBlock)

	// The slow socket reads again: what was in its socket, then the end.
	slow.start()
	select {
	case <-slow.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the slow socket's connection is still open 20s after web3gate dropped it")
	}
	_, _, _, endErr := slow.snapshot()
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(endErr, &ce):
		if ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "slow consumer") {
			t.Errorf("the slow socket was closed with %d %q, want 1008 \"slow consumer: …\"", ce.Code, ce.Text)
		}
		t.Logf("the slow socket read %d messages, then the close frame %d %q", slow.messages.Load(), ce.Code, ce.Text)
	case errors.As(endErr, &ne) && ne.Timeout():
		t.Errorf("the slow socket timed out instead of being closed: %v", endErr)
	default:
		t.Logf("the slow socket read %d messages, then its connection ended without a close frame: %v", slow.messages.Load(), endErr)
	}
	if n := metricSum(t, g, "web3gate_websocket_dropped_total"); n != 1 {
		t.Errorf("web3gate_websocket_dropped_total %v (%v), want 1", n, metricValues(t, g, "web3gate_websocket_dropped_total"))
	}
	// The server ends the slow socket's bookkeeping just after its close reached the client.
	var n float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n = metricSum(t, g, "web3gate_websocket_connections"); n == float64(len(fast)) {
			break
		}
	}
	if n != float64(len(fast)) {
		t.Errorf("web3gate_websocket_connections %v, want %d", n, len(fast))
	}

	for i, s := range fast {
		heads, logs, errs, err := s.snapshot()
		checkHeadNumbers(t, fmt.Sprintf("fast socket %d", i), heads, first, last)
		if len(errs) > 0 || err != nil {
			t.Errorf("fast socket %d: errors %v, ended: %v", i, errs, err)
		}
		if i == 3 && logs != int(last-first+1)*logsPerBlock {
			t.Errorf("fast socket %d: %d logs, want %d", i, logs, int(last-first+1)*logsPerBlock)
		}
	}
	t.Logf("web3gate RSS: %d MiB before the slow socket, at most %d MiB until it was dropped (%d blocks)", rss0>>20, maxRSS>>20, last-slowFirst+1)
	if maxRSS-rss0 > rssBound {
		t.Errorf("web3gate's RSS grew by %d MiB, more than %d MiB", (maxRSS-rss0)>>20, rssBound>>20)
	}
}

// rss is the resident memory of g's process (VmRSS), in bytes.
func rss(t *testing.T, g *gateway) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/<pid>/status")
	return 0
}
