//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"gopkg.in/yaml.v3"
)

// headNote and logNote are notifications as geth and anvil write them (compact JSON).
func headNote(id string, n uint64) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"%s","result":{"baseFeePerGas":"0x7","number":"0x%x","hash":"0x01","parentHash":"0x02","logsBloom":"0x00"}}}`, id, n)
}

func logNote(id string, n uint64, removed bool) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"%s","result":{"address":"0xaa","topics":["0xdd"],"data":"0x01","blockNumber":"0x%x","transactionHash":"0x03","transactionIndex":"0x0","blockHash":"0x04","logIndex":"0x1","removed":%t}}}`, id, n, removed)
}

func TestNotifiedBlock(t *testing.T) {
	for _, c := range []struct {
		name string
		msg  string
		logs bool
		want uint64
	}{
		{"newHeads", headNote("0xab", 0x1f), false, 0x1f},
		{"log", logNote("0xab", 300, false), true, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := notifiedBlock([]byte(c.msg), c.logs)
			if err != nil || got != c.want {
				t.Fatalf("notifiedBlock = %d, %v; want %d", got, err, c.want)
			}
		})
	}
	for _, c := range []struct {
		name string
		msg  string
		logs bool
	}{
		{"a removed log", logNote("0xab", 3, true), true},
		{"a header read as a log", headNote("0xab", 3), true},
		{"a log read as a header", logNote("0xab", 3, false), false},
		{"an answer, not a notification", `{"jsonrpc":"2.0","id":1,"result":{"number":"0x1"}}`, false},
		{"not hex", strings.Replace(headNote("0xab", 3), `"number":"0x3"`, `"number":"0xzz"`, 1), false},
		{"unterminated", `{"method":"eth_subscription","params":{"result":{"number":"0x3`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if n, err := notifiedBlock([]byte(c.msg), c.logs); err == nil {
				t.Fatalf("notifiedBlock = %d, nil; want an error", n)
			}
		})
	}
}

func TestSubscriptionID(t *testing.T) {
	id, err := subscriptionID([]byte(`{"jsonrpc":"2.0","id":1,"result":"0x9cef478923ff08bf67fde6c64013158d"}`))
	if err != nil || id != "0x9cef478923ff08bf67fde6c64013158d" {
		t.Fatalf("subscriptionID = %q, %v", id, err)
	}
	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"notifications not supported"}}`,
		`{"jsonrpc":"2.0","id":2,"result":"0x01"}`,
		`{"jsonrpc":"2.0","id":1,"result":"12"}`,
		`{"jsonrpc":"2.0","id":1,"result":false}`,
	} {
		if id, err := subscriptionID([]byte(answer)); err == nil {
			t.Errorf("subscriptionID(%s) = %q, nil; want an error", answer, id)
		}
	}
}

// cmsg builds one control message as the kernel writes it on 64-bit Linux.
func cmsg(level, typ int32, data []byte) []byte {
	l := syscall.SizeofCmsghdr + len(data)
	b := make([]byte, (l+cmsgAlign-1)&^(cmsgAlign-1))
	binary.NativeEndian.PutUint64(b, uint64(l))
	binary.NativeEndian.PutUint32(b[8:], uint32(level))
	binary.NativeEndian.PutUint32(b[12:], uint32(typ))
	copy(b[syscall.SizeofCmsghdr:], data)
	return b
}

func TestRxTimestamp(t *testing.T) {
	ts := make([]byte, 16)
	binary.NativeEndian.PutUint64(ts, 1_700_000_000)
	binary.NativeEndian.PutUint64(ts[8:], 123_456_789)
	want := int64(1_700_000_000_123_456_789)
	stamp := cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, ts)
	other := cmsg(syscall.SOL_SOCKET, syscall.SCM_RIGHTS, []byte{1, 0, 0, 0})
	for name, oob := range map[string][]byte{"alone": stamp, "after another message": append(other, stamp...)} {
		if got, ok := rxTimestamp(oob); !ok || got != want {
			t.Errorf("%s: rxTimestamp = %d, %v; want %d", name, got, ok, want)
		}
	}
	for name, oob := range map[string][]byte{"none": nil, "another message": other, "truncated": stamp[:20],
		"a length beyond the buffer": append(cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, ts)[:16:16], ts[:4]...)} {
		if got, ok := rxTimestamp(oob); ok {
			t.Errorf("%s: rxTimestamp = %d, true; want none", name, got)
		}
	}
}

// stampedPair connects a stampConn to a loopback listener and exchanges bytes until reads
// carry receive times. The kernel turns receive timestamps on for the whole stack shortly
// after the first socket asks (a static key switched from a work queue), and off when the
// last such socket closes: segments received before carry none. While the pair is open,
// every socket's do.
func stampedPair(t *testing.T) (*stampConn, net.Conn, func(i int) (before, after int64)) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := dialStamped(t.Context(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { srv.Close() })
	sc := c.(*stampConn)
	buf := make([]byte, 64)
	// exchange writes to the client and reads it there, returning the times around.
	exchange := func(i int) (before, after int64) {
		t.Helper()
		sc.last = 0
		before = time.Now().UnixNano()
		if _, err := srv.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		n, err := sc.Read(buf)
		after = time.Now().UnixNano()
		if err != nil || string(buf[:n]) != "hello" {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
		return before, after
	}
	for i := 0; sc.last == 0; i++ {
		if i == 1000 {
			t.Fatal("no receive time after 1000 reads")
		}
		exchange(i)
		time.Sleep(time.Millisecond)
	}
	return sc, srv, exchange
}

// TestStampConn reads over a real loopback connection: every read carries the kernel's
// receive time, which lies between the write and the end of the read.
func TestStampConn(t *testing.T) {
	sc, srv, exchange := stampedPair(t)
	for i := range 3 {
		before, after := exchange(i)
		if sc.last < before || sc.last > after {
			t.Fatalf("read %d: receive time %d outside the write..read interval [%d, %d]", i, sc.last, before, after)
		}
	}
	srv.Close()
	if n, err := sc.Read(make([]byte, 8)); n != 0 || err == nil {
		t.Fatalf("read after the peer closed: %d, %v; want EOF", n, err)
	}
}

// TestWSClient runs the subscribers against a WebSocket server that answers eth_subscribe and
// then sends two blocks to every subscription (perBlock logs each to the logs ones), one of
// the logs subscribers getting a notification of another subscription.
func TestWSClient(t *testing.T) {
	const perBlock = 3
	stampedPair(t) // receive times on from the first notification
	up := websocket.Upgrader{}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "k" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		// The test dials with parallelism 1: a socket's handler counts itself before its
		// subscription is answered, and so before the next socket is dialed. It keeps its
		// own number: the next sockets' handlers count on while it writes.
		mine := int(n.Add(1))
		id := fmt.Sprintf("0x%032x", mine)
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"result":"`+id+`"}`)); err != nil {
			return
		}
		logs := strings.Contains(string(msg), `"logs"`)
		for block := uint64(7); block <= 8; block++ {
			if !logs {
				_ = c.WriteMessage(websocket.TextMessage, []byte(headNote(id, block)))
				continue
			}
			if mine == 5 && block == 8 {
				_ = c.WriteMessage(websocket.TextMessage, []byte(logNote("0x0bad", block, false)))
			}
			for range perBlock {
				_ = c.WriteMessage(websocket.TextMessage, []byte(logNote(id, block, false)))
			}
		}
		_, _, _ = c.ReadMessage() // until the client closes
	}))
	t.Cleanup(srv.Close)

	wc := newWSClient("ws"+strings.TrimPrefix(srv.URL, "http"), http.Header{"X-API-Key": {"k"}}, perBlock)
	if err := wc.subscribeAll(t.Context(), 3, 2, 1, `{"address":"0xaa"}`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if got, err := wc.waitDone(ctx, 10, 10*time.Second); err != nil || got != 10 {
		t.Fatalf("waitDone = %d, %v; want all 10 deliveries (5 sockets, 2 blocks)", got, err)
	}
	wc.close()
	for i, s := range wc.subs {
		if s.logs != (i >= 3) || len(s.got) != 2 || s.got[0].block != 7 || s.got[1].block != 8 || s.err != nil {
			t.Fatalf("socket %d (logs %v): got %+v, err %v", i, s.logs, s.got, s.err)
		}
		for _, d := range s.got {
			if d.first == 0 || d.last < d.first || d.seen < d.last {
				t.Errorf("socket %d: delivery %+v: want first ≤ last ≤ seen, none 0", i, d)
			}
		}
		if wantBad := i == 4; (s.bad == 1) != wantBad || (wantBad && !strings.Contains(s.badMsg, "0x0bad")) {
			t.Errorf("socket %d: %d bad notifications (%q), want %v", i, s.bad, s.badMsg, wantBad)
		}
	}

	// A refused upgrade fails subscribeAll with the status.
	refused := newWSClient("ws"+strings.TrimPrefix(srv.URL, "http"), http.Header{}, perBlock)
	if err := refused.subscribeAll(t.Context(), 2, 0, 2, ""); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("subscribeAll without the key: %v, want HTTP 401", err)
	}
	refused.close()
}

func TestCollectDeliveries(t *testing.T) {
	// Blocks 10 (warm-up), 11 and 12, sent at 1000, 2000, 3000; the feed saw them 50 later.
	numbers, sent, starts := []uint64{10, 11, 12}, []int64{1000, 2000, 3000}, []int64{1050, 2050, 3050}
	heads := &subscriber{got: []delivery{{10, 1060, 1060, 1070}, {11, 2060, 2060, 2070}, {12, 3070, 3070, 3080}}}
	logs := &subscriber{logs: true, got: []delivery{{10, 1055, 1065, 1075}, {11, 2055, 2080, 2090}, {12, 3055, 3090, 3095}}}
	s := &wsSample{}
	if p := collectDeliveries(s, []*subscriber{heads, logs}, numbers, starts, sent, 1); len(p) != 0 {
		t.Fatalf("problems %v", p)
	}
	for name, c := range map[string]struct{ got, want []int64 }{
		"all":       {s.all, []int64{10, 20, 30, 40}},
		"heads":     {s.heads, []int64{10, 20}},
		"logs":      {s.logs, []int64{30, 40}},
		"from send": {s.fromSend, []int64{60, 70, 80, 90}},
		// The blocks' first deliveries: 2055 and 3055, the logs' first logs.
		"spread": {s.spread, []int64{5, 15, 25, 35}},
		"seen":   {s.seen, []int64{20, 30, 40, 45}},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}

	broken := []*subscriber{
		{got: []delivery{{10, 1, 1, 1}, {11, 1, 1, 1}, {11, 1, 1, 1}}}, // 12 missing, 11 twice
		{got: []delivery{{10, 1, 1, 1}, {11, 1, 1, 1}, {12, 1, 1, 1}, {99, 1, 1, 1}}, bad: 2, badMsg: "odd"},
		{got: []delivery{{10, 1, 1, 1}, {11, 0, 0, 1}, {12, 1, 1, 1}}, err: fmt.Errorf("close 1008")},
	}
	p := strings.Join(collectDeliveries(&wsSample{}, broken, numbers, starts, sent, 1), "; ")
	for _, want := range []string{"1 block deliveries missing", "1 blocks delivered twice", "1 deliveries of blocks the bench did not mine",
		"1 deliveries without a kernel receive time", "2 bad notifications (first: odd)", "1 sockets closed by the server (first: close 1008)"} {
		if !strings.Contains(p, want) {
			t.Errorf("problems %q lack %q", p, want)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	for q, want := range map[float64]time.Duration{0.5: 50, 0.99: 99, 1: 100, 0: 1} {
		if got := quantile(xs, q); got != want {
			t.Errorf("quantile(1..100, %v) = %d, want %d", q, got, want)
		}
	}
	if got := quantile([]int64{7}, 0.99); got != 7 {
		t.Errorf("quantile of one = %d", got)
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of none = %d", got)
	}
}

func TestProcessRSS(t *testing.T) {
	rss, err := processRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("processRSS(self) = %d, %v", rss, err)
	}
	if got, err := parseVmRSS([]byte("Name:\tx\nVmRSS:\t   2048 kB\nVmSwap:\t0 kB\n")); err != nil || got != 2048*1024 {
		t.Errorf("parseVmRSS = %d, %v", got, err)
	}
	for _, status := range []string{"Name:\tkthreadd\n", "VmRSS:\t2048 MB\n", "VmRSS:\tx kB\n"} {
		if got, err := parseVmRSS([]byte(status)); err == nil {
			t.Errorf("parseVmRSS(%q) = %d, nil; want an error", status, got)
		}
	}
}

// TestWSConfigBytes: the shipped config.yaml takes (w)'s settings, and its limits cover the
// sockets.
func TestWSConfigBytes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := wsConfigBytes(raw, 1, 2, "/tmp/x", 11_000)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Server struct {
			Listen        string `yaml:"listen"`
			MaxConns      int    `yaml:"maxConns"`
			MaxConnsPerIP int    `yaml:"maxConnsPerIP"`
			Websocket     struct {
				MaxConnsPerClient    int `yaml:"maxConnsPerClient"`
				MaxConnsPerPrincipal int `yaml:"maxConnsPerPrincipal"`
				MaxConnsPerAddress   int `yaml:"maxConnsPerAddress"`
			} `yaml:"websocket"`
		} `yaml:"server"`
		Store struct {
			Path string `yaml:"path"`
		} `yaml:"store"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	s := cfg.Server
	if s.Listen != "127.0.0.1:1" || s.MaxConns < 11_000 || s.MaxConnsPerIP < 11_000 || s.Websocket.MaxConnsPerClient < 11_000 ||
		s.Websocket.MaxConnsPerPrincipal < 11_000 || s.Websocket.MaxConnsPerAddress < 11_000 ||
		cfg.Store.Path != "/tmp/x/web3gate.db" {
		t.Fatalf("config: %+v, store %q", s, cfg.Store.Path)
	}
}

func TestFeedSight(t *testing.T) {
	fs, err := parseFeedSight(map[string]float64{
		`web3gate_feed_head_block{chain="dev"}`:                  42,
		`web3gate_feed_head_seen_timestamp_seconds{chain="dev"}`: 1.7645e9 + 0.25,
	})
	// Seconds in a float64: about a quarter of a microsecond of precision at today's dates.
	if d := fs.at - 1_764_500_000_250_000_000; err != nil || fs.block != 42 || d < -1000 || d > 1000 {
		t.Fatalf("parseFeedSight = %+v, %v", fs, err)
	}
	for name, m := range map[string]map[string]float64{
		"none":          {},
		"never seen":    {`web3gate_feed_head_block{chain="dev"}`: 0, `web3gate_feed_head_seen_timestamp_seconds{chain="dev"}`: 0},
		"two chains":    {`web3gate_feed_head_block{chain="a"}`: 1, `web3gate_feed_head_block{chain="b"}`: 1, `web3gate_feed_head_seen_timestamp_seconds{chain="a"}`: 1},
		"no sight time": {`web3gate_feed_head_block{chain="dev"}`: 1},
	} {
		if fs, err := parseFeedSight(m); err == nil {
			t.Errorf("%s: parseFeedSight = %+v, nil; want an error", name, fs)
		}
	}

	at, err := sightTimes([]feedSighting{{7, 100}, {8, 200}}, []uint64{7, 8})
	if err != nil || fmt.Sprint(at) != "[100 200]" {
		t.Fatalf("sightTimes = %v, %v", at, err)
	}
	if _, err := sightTimes([]feedSighting{{7, 100}, {7, 100}}, []uint64{7, 8}); err == nil {
		t.Error("a sighting of the previous block was taken for the next")
	}
	if _, err := sightTimes([]feedSighting{{7, 100}}, []uint64{7, 8}); err == nil {
		t.Error("a block without a sighting was accepted")
	}
}

func TestParseIRQTime(t *testing.T) {
	got, err := parseIRQTime([]byte("cpu  100 0 50 9000 3 7 30 0 0 0\ncpu0 50 0 25 4500 1 3 15 0 0 0\n"))
	if err != nil || got != 370*time.Millisecond {
		t.Fatalf("parseIRQTime = %v, %v; want 37 ticks", got, err)
	}
	for _, stat := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 3 4 5 x 7 8\n"} {
		if got, err := parseIRQTime([]byte(stat)); err == nil {
			t.Errorf("parseIRQTime(%q) = %v, nil; want an error", stat, got)
		}
	}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseIRQTime(raw); err != nil {
		t.Fatalf("this machine's /proc/stat: %v", err)
	}
}
