//go:build attack

package proxy

// The full-scale figure of the bounds on what a socket can make the server hold
// (docs/security.md): go test -tags attack -run TestAttack -v ./proxy/

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	dto "github.com/prometheus/client_model/go"

	"github.com/web3gate/web3gate/internal/testproc"
)

// N1: 5 sockets send 400 calls each whose answers are 2 MiB, and read nothing.
func TestAttackLargeAnswers(t *testing.T) {
	addr, s, reg := wsServer(t, 0, nil)
	runtime.GC()
	base := float64(testproc.RSS(t, 0)) / (1 << 20)
	var conns []*websocket.Conn
	for range 5 {
		c, _, err := smallBufDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	for _, c := range conns {
		go func() {
			for i := range 400 {
				msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"big","params":[%d]}`, i, 2<<20)
				if c.WriteMessage(websocket.TextMessage, []byte(msg)) != nil {
					return
				}
			}
		}()
	}
	peak, peakQueued := base, int64(0)
	dur := 70 * time.Second
	if v := os.Getenv("ATTACK_SECONDS"); v != "" {
		n, _ := strconv.Atoi(v)
		dur = time.Duration(n) * time.Second
	}
	for time.Since(start) < dur {
		time.Sleep(100 * time.Millisecond)
		r := float64(testproc.RSS(t, 0)) / (1 << 20)
		peak = max(peak, r)
		peakQueued = max(peakQueued, s.ws.budget.used.Load())
		if d := time.Since(start); d.Truncate(5*time.Second) != (d - 100*time.Millisecond).Truncate(5*time.Second) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			t.Logf("t=%2.0fs rss %6.1f MiB (+%6.1f) heap in use %6.1f MiB, answers queued %6.1f MiB, sockets %d",
				d.Seconds(), r, r-base, float64(ms.HeapInuse)/(1<<20), float64(s.ws.budget.used.Load())/(1<<20), s.ws.count())
		}
	}
	t.Logf("base rss %.1f MiB, peak %.1f MiB (+%.1f), peak answers queued %.1f MiB, per-socket peak %.1f MiB",
		base, peak, peak-base, float64(peakQueued)/(1<<20), float64(s.ws.peakQueued.Load())/(1<<20))
	for _, name := range []string{"web3gate_websocket_dropped_total", "web3gate_server_refused_total", "web3gate_server_memory_frees_total"} {
		t.Logf("%s %v", name, counters(t, reg, name))
	}
	runtime.KeepAlive(conns) // the attacker's sockets stay open: it never reads, never closes
	_ = bytes.MinRead
}

// counters are the series of the counter name, by their labels.
func counters(t *testing.T, reg interface {
	Gather() ([]*dto.MetricFamily, error)
}, name string) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, lp.GetValue())
			}
			out[strings.Join(l, ",")] = m.GetCounter().GetValue()
		}
	}
	return out
}

// N3: sockets each send a frame declaring ~1 MiB (maxMessageBytes), send most of it, then
// dribble a byte a second. The partial messages count against maxBodyBytesInFlight, and each
// socket is closed at messageReadTimeout from its frame's header, dribbling or not. The
// attacker is one address on loopback with no token: the caps per address and per client id
// (and maxConnsPerIP) are raised to let all its sockets in, as a crowd of addresses would
// get them. ATTACK_SOCKETS (198) and ATTACK_BODY_BUDGET_MIB (the default, 256) change the
// scale.
func TestAttackStalledFrames(t *testing.T) {
	sockets := envInt("ATTACK_SOCKETS", 198)
	const (
		declared = 1<<20 - 64      // under maxMessageBytes (1 MiB)
		sent     = declared - 4096 // most of it
	)
	addr, s, reg := wsServer(t, 0, func(c *Config) {
		if os.Getenv("ATTACK_DEFAULT_CAPS") != "" {
			return
		}
		c.MaxConnsPerIP = c.MaxConns
		c.WebSocket.MaxConnsPerAddress = c.MaxConns
		c.WebSocket.MaxConnsPerClient = c.MaxConns
		c.WebSocket.MaxConnsPerPrincipal = c.MaxConns
		if v := envInt("ATTACK_BODY_BUDGET_MIB", 0); v > 0 {
			c.MaxBodyBytesInFlight = v << 20
		}
	})
	cfg := s.cfg
	runtime.GC()
	base := float64(testproc.RSS(t, 0)) / (1 << 20)
	var conns []*websocket.Conn
	refused := map[string]int{}
	for range sockets {
		c, resp, err := wsDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
		if err != nil {
			why := err.Error()
			if resp != nil {
				why = resp.Status
			}
			refused[why]++
			continue
		}
		conns = append(conns, c)
	}
	t.Logf("%d sockets of %d opened (refused: %v), %d open on the server", len(conns), sockets, refused, s.ws.count())
	if len(conns) != sockets {
		t.Fatalf("only %d of %d sockets opened", len(conns), sockets)
	}
	hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint64(hdr[2:10], declared)
	part := append(hdr, `{"jsonrpc":"2.0","id":1,"method":"echo","params":["`...)
	part = append(part, bytes.Repeat([]byte("x"), sent-len(part)+len(hdr))...)
	start := time.Now()
	closedAfter := make([]time.Duration, len(conns)) // from the frame's header to the server's close
	var wg sync.WaitGroup
	for i, c := range conns {
		nc := c.NetConn()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sentAt := time.Now()
			if _, err := nc.Write(part); err != nil {
				return
			}
			// Dribble a byte a second; read (raw, no pongs) until the server closes.
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
						if _, err := nc.Write([]byte("x")); err != nil {
							return
						}
					}
				}
			}()
			b := make([]byte, 4096)
			_ = nc.SetReadDeadline(time.Now().Add(120 * time.Second))
			for {
				if _, err := nc.Read(b); err != nil {
					break
				}
			}
			closedAfter[i] = time.Since(sentAt)
			close(stop)
		}()
	}
	peak, peakHeld, peakHeap := base, int64(0), 0.0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Duration(-1)
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
		}
		r := float64(testproc.RSS(t, 0)) / (1 << 20)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, r)
		peakHeap = max(peakHeap, float64(ms.HeapInuse)/(1<<20))
		peakHeld = max(peakHeld, s.budget.used.Load())
		if d := time.Since(start).Truncate(time.Second); d != lastLog && d%(2*time.Second) == 0 {
			lastLog = d
			t.Logf("t=%2.0fs rss %6.1f MiB (+%6.1f) heap in use %6.1f MiB, partial messages held %6.1f MiB, sockets %d",
				d.Seconds(), r, r-base, float64(ms.HeapInuse)/(1<<20), float64(s.budget.used.Load())/(1<<20), s.ws.count())
		}
	}
	closedAt := time.Since(start)
	if held := s.budget.used.Load(); held > int64(cfg.MaxBodyBytesInFlight) || peakHeld > int64(cfg.MaxBodyBytesInFlight) {
		t.Fatalf("partial messages held %d bytes (peak %d), over maxBodyBytesInFlight %d", held, peakHeld, cfg.MaxBodyBytesInFlight)
	}
	slices.Sort(closedAfter)
	t.Logf("config: %d sockets, frames declaring %d bytes, %d sent, then a byte a second; messageReadTimeout %v, maxBodyBytesInFlight %d MiB, maxMessageBytes %d",
		len(conns), declared, sent, cfg.WebSocket.MessageReadTimeout, cfg.MaxBodyBytesInFlight>>20, cfg.WebSocket.MaxMessageBytes)
	t.Logf("closed after (from the frame's header): min %v, median %v, max %v; all closed %v after the start",
		closedAfter[0].Round(10*time.Millisecond), closedAfter[len(closedAfter)/2].Round(10*time.Millisecond), closedAfter[len(closedAfter)-1].Round(10*time.Millisecond), closedAt.Round(10*time.Millisecond))
	t.Logf("base rss %.1f MiB, peak %.1f MiB (+%.1f), peak heap in use %.1f MiB, peak partial messages held %.1f MiB (maxBodyBytesInFlight %d MiB)",
		base, peak, peak-base, peakHeap, float64(peakHeld)/(1<<20), cfg.MaxBodyBytesInFlight>>20)
	for _, after := range []time.Duration{time.Second, 5 * time.Second, 12 * time.Second, 20 * time.Second} {
		time.Sleep(after - time.Since(start.Add(closedAt)))
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r := float64(testproc.RSS(t, 0)) / (1 << 20)
		t.Logf("%v after the last close: rss %.1f MiB (+%.1f), heap in use %.1f MiB, held %d bytes, sockets %d",
			after, r, r-base, float64(ms.HeapInuse)/(1<<20), s.budget.used.Load(), s.ws.count())
	}
	for _, name := range []string{"web3gate_websocket_dropped_total", "web3gate_server_refused_total", "web3gate_server_memory_frees_total"} {
		t.Logf("%s %v", name, counters(t, reg, name))
	}
	// Each socket was closed for its message's deadline (not the ping timeout's 60 s); the
	// times are the figure, logged above.
	if got := counters(t, reg, "web3gate_websocket_dropped_total")["message_timeout"]; int(got) != len(conns) {
		t.Fatalf("%v sockets closed at messageReadTimeout, want %d", got, len(conns))
	}
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil {
			return n
		}
	}
	return def
}
