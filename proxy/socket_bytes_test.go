package proxy

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/internal/wait"
)

// smallBufDialer dials sockets whose receive buffer is small, so that what the client does
// not read stays on the server's side.
func smallBufDialer() *websocket.Dialer {
	d := wsDialer()
	d.NetDial = func(network, addr string) (net.Conn, error) {
		nd := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = setRcvBuf(fd, 8192) })
			return errors.Join(err, serr)
		}}
		return nd.Dial(network, addr)
	}
	return d
}

// smallSendBufListener accepts connections whose send buffer is fixed small (SO_SNDBUF set,
// which also turns the kernel's tuning of it off), so that what the server writes to a
// client that reads nothing stays in the server's queues: on loopback the kernel would
// otherwise grow the buffer by megabytes and take the queued answers in at its own pace.
type smallSendBufListener struct{ net.Listener }

func (l smallSendBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		err = errors.Join(err, tc.SetWriteBuffer(8192))
	}
	return c, err
}

// sumCounter is the sum of the series of the counter name.
func sumCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A client that asks for large answers and reads none cannot make the server hold more of
// them than server.websocket.maxQueuedBytes: the answers past it are refused (-32005), and
// once the client reads, every call has exactly one answer, a result or that refusal. The
// accounting is back to zero when the sockets end.
func TestWebSocketQueueBoundedInBytes(t *testing.T) {
	const (
		perSocket = 256 << 10
		answer    = 64 << 10
		calls     = 200
	)
	addr, s, reg := wsServer(t, 0, func(c *Config) {
		c.WebSocket.MaxQueuedBytes = perSocket
		c.WebSocket.MaxQueuedBytesTotal = 4 * perSocket
		c.WebSocket.WriteTimeout = 30 * time.Second
	})
	c, _, err := smallBufDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for i := range calls {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"big","params":[%d]}`, i, answer)
		if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every call answered", func() bool { return sumCounter(t, reg, "web3gate_rpc_requests_total") >= calls })
	if peak := s.ws.peakQueued.Load(); peak > perSocket {
		t.Fatalf("a socket's queue held %d bytes, over maxQueuedBytes %d", peak, perSocket)
	}
	refused := testutil.ToFloat64(mustVec(t, reg, "web3gate_server_refused_total", "websocket_queue_bytes"))
	if refused == 0 {
		t.Fatal("no call refused while the client read nothing")
	}
	results, refusals := 0, 0
	seen := map[int]bool{}
	for range calls {
		var a struct {
			ID     int
			Result string
			Error  struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal([]byte(wsRead(t, c)), &a); err != nil {
			t.Fatal(err)
		}
		if seen[a.ID] {
			t.Fatalf("two answers to call %d", a.ID)
		}
		seen[a.ID] = true
		switch {
		case len(a.Result) == answer-2:
			results++
		case a.Error.Code == -32005 && strings.Contains(a.Error.Message, "server.websocket.maxQueuedBytes (262144 bytes)"):
			refusals++
		default:
			t.Fatalf("answer to call %d: %d-byte result, error %d %q", a.ID, len(a.Result), a.Error.Code, a.Error.Message)
		}
	}
	if results == 0 || refusals != int(refused) {
		t.Fatalf("%d results, %d refusals (the server counted %v)", results, refusals, refused)
	}
	_ = c.Close()
	wait.For(t, "the queues counted out", func() bool {
		return s.ws.queuedBytes.Load() == 0 && s.ws.budget.used.Load() == 0
	})
}

// The answers of all sockets together stay within server.websocket.maxQueuedBytesTotal:
// two sockets that read nothing, each allowed more than half of it, get refusals once it
// is reached, and the budget never goes over it.
func TestWebSocketQueuesBoundedTogether(t *testing.T) {
	const (
		total  = 256 << 10
		answer = 32 << 10
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Both sockets' answers must stay queued together: with the kernel's buffers tuned up,
	// one socket's queue drained into them while the other's filled, and the total was
	// never reached (2 runs in 50).
	addr, s, reg := wsServeOn(t, smallSendBufListener{ln}, 0, func(c *Config) {
		// Each socket's own bound at 3/4 of the total: one socket cannot fill the total,
		// two can, whichever reader runs first (with the two bounds equal, a socket that
		// filled the total alone was refused by its own bound only).
		c.WebSocket.MaxQueuedBytes = total * 3 / 4
		c.WebSocket.MaxQueuedBytesTotal = total
		c.WebSocket.WriteTimeout = 30 * time.Second
	})
	var conns []*websocket.Conn
	for range 2 {
		c, _, err := smallBufDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c)
	}
	const calls = 100
	for i := range calls {
		for _, c := range conns {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"big","params":[%d]}`, i, answer)
			if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait.For(t, "every call answered", func() bool { return sumCounter(t, reg, "web3gate_rpc_requests_total") >= 2*calls })
	busy := testutil.ToFloat64(mustVec(t, reg, "web3gate_server_refused_total", "websocket_queue_total"))
	full := testutil.ToFloat64(mustVec(t, reg, "web3gate_server_refused_total", "websocket_queue_bytes"))
	if busy == 0 || s.ws.budget.used.Load() > total {
		t.Fatalf("refused %v over the total, %v over a socket's bound; %d bytes held", busy, full, s.ws.budget.used.Load())
	}
	for _, c := range conns {
		_ = c.Close()
	}
	wait.For(t, "the queues counted out", func() bool {
		return s.ws.queuedBytes.Load() == 0 && s.ws.budget.used.Load() == 0
	})
}

// A message whose frame arrives in part and then a byte at a time counts against the body
// budget, and is closed at server.websocket.messageReadTimeout from its header although
// bytes keep coming.
func TestWebSocketMessageDeadline(t *testing.T) {
	addr, s, reg := wsServer(t, 0, func(c *Config) { c.WebSocket.MessageReadTimeout = 500 * time.Millisecond })
	c := wsDial(t, addr, "/v1/web3/mainnet")
	if got := wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`); !strings.Contains(got, `"result":[1]`) {
		t.Fatalf("echo: %s", got)
	}
	nc := c.NetConn()
	// A masked text frame declaring 64 KiB (mask zero: the payload goes as it is).
	const declared = 64 << 10
	hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint64(hdr[2:10], declared)
	part := append(hdr, `[{"jsonrpc":"2.0","id":1,"method":"echo","params":["`...)
	part = append(part, strings.Repeat("x", 40<<10)...)
	if _, err := nc.Write(part); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the partial message counted in the body budget", func() bool { return s.budget.used.Load() >= 32<<10 })
	dropped := mustVec(t, reg, "web3gate_websocket_dropped_total", "message_timeout")
	// Dribble until the server gives up: a write fails once it has closed the connection.
	wait.For(t, "the dribbling socket closed", func() bool {
		_, err := nc.Write([]byte("x"))
		return err != nil && testutil.ToFloat64(dropped) == 1
	})
	wait.For(t, "the body budget given back", func() bool { return s.budget.used.Load() == 0 })
}

// A message refused because the body budget is spent (-32005) is skipped under its own
// deadline: a client that stalls the rest of it is closed at messageReadTimeout, not held
// to the ping timeout.
func TestWebSocketRefusedMessageDeadline(t *testing.T) {
	addr, s, reg := wsServer(t, 0, func(c *Config) {
		c.MaxBodyBytes, c.MaxBodyBytesInFlight = 64<<10, 64<<10
		c.WebSocket.MaxMessageBytes = 64 << 10
		c.WebSocket.MessageReadTimeout = 500 * time.Millisecond
		c.WebSocket.PingInterval = time.Hour
	})
	// partial sends a masked text frame declaring 60 KiB and the first n bytes of it.
	partial := func(c *websocket.Conn, n int) {
		t.Helper()
		hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(hdr[2:10], 60<<10)
		if _, err := c.NetConn().Write(append(hdr, strings.Repeat("x", n)...)); err != nil {
			t.Fatal(err)
		}
	}
	a := wsDial(t, addr, "/v1/web3/mainnet")
	partial(a, 40<<10) // holds the budget: its buffer has grown to 64 KiB
	wait.For(t, "the first message holding the budget", func() bool { return s.budget.used.Load() >= 32<<10 })
	b := wsDial(t, addr, "/v1/web3/mainnet")
	partial(b, 40<<10)
	if got := wsRead(t, b); !strings.Contains(got, `"code":-32005`) || !strings.Contains(got, "server busy") {
		t.Fatalf("the message over the budget: %s", got)
	}
	dropped := mustVec(t, reg, "web3gate_websocket_dropped_total", "message_timeout")
	wait.For(t, "both stalled sockets closed at messageReadTimeout", func() bool { return testutil.ToFloat64(dropped) == 2 })
	wait.For(t, "the sockets ended, the budget given back", func() bool { return s.ws.count() == 0 && s.budget.used.Load() == 0 })
}
