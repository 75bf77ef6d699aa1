package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// testVerifier accepts the client id "cid" with the bearer tokens "tok" (no expiry),
// "short" (expiring shortly after it is verified), both of principal alice, and "tok2" (bob),
// and the client id alone; it refuses two different client ids, as the auth stage does.
type testVerifier struct{ short time.Duration }

func (v testVerifier) VerifyExchange(ex *Exchange, p *Principal) error {
	if ex.ClientIDConflict {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: the request carries different client ids")
	}
	if ex.ClientID != "cid" {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: unknown client id")
	}
	p.ClientID = ex.ClientID
	switch ex.Bearer {
	case "":
	case "tok":
		p.ID = "alice"
	case "tok2":
		p.ID = "bob"
	case "short":
		p.ID, p.Expires = "alice", time.Now().Add(v.short)
	default:
		return jsonrpc.ErrUnauthorized.With("Not Authorized: invalid access token")
	}
	return nil
}

// wsTerminal serves the test methods: echo (its params), slow (echo after 300 ms), sub (a
// subscription whose three notifications, 0 1 2, are sent before its answer is queued),
// ticker (a subscription notified every 5 ms with a string of params[0] bytes), unsub.
func wsTerminal() Handler {
	return HandlerFunc(func(c *Call) (*Response, error) {
		switch c.Request.Method {
		case "echo", "slow":
			if c.Request.Method == "slow" {
				time.Sleep(300 * time.Millisecond)
			}
			if c.Request.Params == nil {
				return &Response{Result: []byte("null")}, nil
			}
			return &Response{Result: bytes.Clone(c.Request.Params)}, nil
		case "sub", "ticker":
			if c.Exchange.Socket == nil {
				return nil, jsonrpc.ErrMethodNotFound.With("notifications not supported")
			}
			sub, err := c.Exchange.Socket.Subscribe(c, "newHeads")
			if err != nil {
				return nil, err
			}
			if c.Request.Method == "sub" {
				for i := range 3 {
					sub.Notify([]byte(strconv.Itoa(i)))
				}
				return &Response{Result: strconv.AppendQuote(nil, sub.ID())}, nil
			}
			size := []int{1}
			_ = json.Unmarshal(c.Request.Params, &size)
			payload := []byte(`"` + strings.Repeat("x", max(size[0], 1)) + `"`)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(5 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						sub.Notify(payload)
					}
				}
			}()
			sub.OnEnd(func() { close(stop); <-done })
			return &Response{Result: strconv.AppendQuote(nil, sub.ID())}, nil
		case "burst":
			// params [size, groups]: groups of 10 notifications "n:xxx…" (n counting from
			// 0, size bytes each), one group (NotifyAll) every millisecond.
			var args [2]int
			if json.Unmarshal(c.Request.Params, &args) != nil {
				return nil, jsonrpc.ErrInvalidParams
			}
			sub, err := c.Exchange.Socket.Subscribe(c, "newHeads")
			if err != nil {
				return nil, err
			}
			go func() {
				n := 0
				for range args[1] {
					group := make([][]byte, 10)
					for i := range group {
						p := fmt.Appendf(nil, `"%d:`, n)
						p = append(p, strings.Repeat("x", max(args[0]-len(p)-1, 0))...)
						group[i] = append(p, '"')
						n++
					}
					sub.NotifyAll(group)
					time.Sleep(time.Millisecond)
				}
			}()
			return &Response{Result: strconv.AppendQuote(nil, sub.ID())}, nil
		case "big":
			// params [size]: a string of size bytes, as a large eth_call result.
			var args [1]int
			if json.Unmarshal(c.Request.Params, &args) != nil {
				return nil, jsonrpc.ErrInvalidParams
			}
			r := bytes.Repeat([]byte("b"), max(args[0], 2)) // one allocation, as an upstream's body
			r[0], r[len(r)-1] = '"', '"'
			return &Response{Result: r}, nil
		case "unsub":
			var ids []string
			if json.Unmarshal(c.Request.Params, &ids) != nil || len(ids) != 1 {
				return nil, jsonrpc.ErrInvalidParams
			}
			return &Response{Result: strconv.AppendBool(nil, c.Exchange.Socket.Unsubscribe(ids[0]))}, nil
		}
		return nil, jsonrpc.ErrMethodNotFound
	})
}

// wsServer serves wsTerminal on /v1/web3/mainnet and /v1/web3/chains/{chain_id} (chain 5
// is known) with WebSockets, a cfg edited by edit, and testVerifier (short-lived tokens
// live short). It is shut down with Shutdown when the test ends.
func wsServer(t *testing.T, short time.Duration, edit func(*Config)) (string, *Server, *prometheus.Registry) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return wsServeOn(t, ln, short, edit)
}

// wsServeOn is wsServer on the listener ln.
func wsServeOn(t *testing.T, ln net.Listener, short time.Duration, edit func(*Config)) (string, *Server, *prometheus.Registry) {
	t.Helper()
	var cfg Config
	cfg.SetDefaults()
	cfg.WebSocket.Enabled = true
	cfg.MaxBatch = 10
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := wsTerminal()
	s, err := New(cfg, Deps{
		Logger:   zap.NewNop(),
		Registry: reg,
		Routes: []*Route{
			{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet", ChainID: 1, Handler: h},
			{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}", Handler: h},
			{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet/{client_id}", ChainID: 1, Handler: h},
		},
		KnownChain: func(id uint64) bool { return id == 5 },
		Verifier:   testVerifier{short: short},
	})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = s.Serve(ln); close(served) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	return ln.Addr().String(), s, reg
}

// wsDial opens a socket on path with the header name/value pairs (default: X-API-Key cid,
// no token) and closes it when the test ends.
func wsDial(t *testing.T, addr, path string, header ...string) *websocket.Conn {
	t.Helper()
	c, resp, err := wsDialer(header...).Dial("ws://"+addr+path, wsHeader(header...))
	if err != nil {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		t.Fatalf("dial %s: %v %s", path, err, body)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func wsDialer(header ...string) *websocket.Dialer {
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Sec-WebSocket-Protocol" {
			d.Subprotocols = strings.Split(header[i+1], ", ")
		}
	}
	return d
}

func wsHeader(header ...string) http.Header {
	h := http.Header{"X-Api-Key": {"cid"}}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] != "Sec-WebSocket-Protocol" {
			h.Set(header[i], header[i+1])
		}
	}
	return h
}

// wsCall sends msg and returns the next message.
func wsCall(t *testing.T, c *websocket.Conn, msg string) string {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	return wsRead(t, c)
}

func wsRead(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("message type %d", typ)
	}
	return string(b)
}

// wsClosed reads until the server's close frame and returns it.
func wsClosed(t *testing.T, c *websocket.Conn) *websocket.CloseError {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("read ended with %v, not a close frame", err)
		}
		return ce
	}
}

func TestWebSocketServesJSONRPC(t *testing.T) {
	addr, _, _ := wsServer(t, 0, nil)
	c := wsDial(t, addr, "/v1/web3/mainnet")
	for _, tc := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`, `{"jsonrpc":"2.0","id":1,"result":[1]}`},
		{`[{"jsonrpc":"2.0","id":"a","method":"echo","params":["a"]},{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":3,"method":"nope"}]`,
			`[{"jsonrpc":"2.0","id":"a","result":["a"]},{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"method not found"}}]`},
		{`{"jsonrpc":"2.0","id":1,"method":"echo"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"empty batch"}}`},
		{`[` + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"echo"},`, 10) + `{"jsonrpc":"2.0","id":1,"method":"echo"}]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch exceeds the limit of 10 requests"}}`},
	} {
		if got := wsCall(t, c, tc.send); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.send, got, tc.want)
		}
	}
	// A notification is not answered: the next answer is the next call's.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","method":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	if got := wsCall(t, c, `{"jsonrpc":"2.0","id":7,"method":"echo"}`); got != `{"jsonrpc":"2.0","id":7,"result":null}` {
		t.Errorf("after a notification: %s", got)
	}
	// The routes with a chain and with the client id in the path serve sockets too.
	c2 := wsDial(t, addr, "/v1/web3/chains/5")
	if got := wsCall(t, c2, `{"jsonrpc":"2.0","id":1,"method":"echo"}`); got != `{"jsonrpc":"2.0","id":1,"result":null}` {
		t.Errorf("chains route: %s", got)
	}
	c3, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/web3/mainnet/cid", nil)
	if err != nil {
		t.Fatalf("client id in the path: %v", err)
	}
	defer c3.Close()
	if got := wsCall(t, c3, `{"jsonrpc":"2.0","id":1,"method":"echo"}`); got != `{"jsonrpc":"2.0","id":1,"result":null}` {
		t.Errorf("client id route: %s", got)
	}
}

// Messages are served concurrently: a slow call does not hold up the next message's answer.
func TestWebSocketMessagesConcurrent(t *testing.T) {
	addr, _, _ := wsServer(t, 0, nil)
	c := wsDial(t, addr, "/v1/web3/mainnet")
	for _, m := range []string{`{"jsonrpc":"2.0","id":"slow","method":"slow"}`, `{"jsonrpc":"2.0","id":"fast","method":"echo"}`} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	first, second := wsRead(t, c), wsRead(t, c)
	if !strings.Contains(first, `"fast"`) || !strings.Contains(second, `"slow"`) {
		t.Fatalf("answers in the order %s, %s", first, second)
	}
}

func TestWebSocketUpgradeRefused(t *testing.T) {
	addr, _, reg := wsServer(t, 0, func(c *Config) {
		c.CORS.AllowedOrigins = []string{"https://app.example"}
		c.WebSocket.MaxConnsPerClient = 2
	})
	for _, tc := range []struct {
		name, path string
		header     []string
		status     int
		body       string
	}{
		{"no client id", "/v1/web3/mainnet", []string{"X-Api-Key", ""}, 401, `"code":4100,"message":"Not Authorized: unknown client id"`},
		{"bad token", "/v1/web3/mainnet", []string{"Authorization", "Bearer nope"}, 401, `"code":4100,"message":"Not Authorized: invalid access token"`},
		{"bad token as subprotocol", "/v1/web3/mainnet", []string{"Sec-WebSocket-Protocol", "web3gate, bearer.nope"}, 401, `"Not Authorized: invalid access token"`},
		{"token without web3gate", "/v1/web3/mainnet", []string{"Sec-WebSocket-Protocol", "bearer.tok"}, 400, `a bearer token subprotocol must be offered beside the web3gate subprotocol (Sec-WebSocket-Protocol: web3gate, bearer.TOKEN)`},
		{"two tokens", "/v1/web3/mainnet", []string{"Authorization", "Bearer tok", "Sec-WebSocket-Protocol", "web3gate, bearer.other"}, 401, `two different bearer tokens`},
		{"unknown chain", "/v1/web3/chains/9", nil, 404, `"code":4901,"message":"chain \"9\" is not served here"`},
		{"other origin", "/v1/web3/mainnet", []string{"Origin", "https://evil.example"}, 403, `Origin is not in server.cors.allowedOrigins`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp, err := wsDialer(tc.header...).Dial("ws://"+addr+tc.path, wsHeader(tc.header...))
			if err == nil {
				c.Close()
				t.Fatal("upgraded")
			}
			if resp == nil {
				t.Fatalf("no HTTP answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) || resp.Header.Get("Sec-WebSocket-Protocol") != "" {
				t.Fatalf("%d %s %v, want %d with %s", resp.StatusCode, b, resp.Header, tc.status, tc.body)
			}
		})
	}
	// The allowed origin is served.
	wsDial(t, addr, "/v1/web3/mainnet", "Origin", "https://app.example")
	// maxConnsPerClient: 2 open (one above), the third is refused with 429.
	wsDial(t, addr, "/v1/web3/mainnet")
	_, resp, err := wsDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third socket: %v %v", err, resp)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"code":-32005,"message":"too many WebSockets: 2 are open for this client id, the most server.websocket.maxConnsPerClient allows`) {
		t.Fatalf("429 body %s", b)
	}
	if got := testutil.ToFloat64(mustVec(t, reg, "web3gate_server_refused_total", "websockets_per_client")); got != 1 {
		t.Errorf("web3gate_server_refused_total{reason=websockets_per_client} %v, want 1", got)
	}
	// A socket joins the gauge once its server side has taken it over, just after the client
	// read the 101.
	wait.For(t, "web3gate_websocket_connections 2", func() bool {
		return testutil.ToFloat64(mustGauge(t, reg, "web3gate_websocket_connections")) == 2
	})
	// A plain GET on a JSON-RPC route keeps its answer: 405, POST allowed.
	resp, err = http.Get("http://" + addr + "/v1/web3/mainnet")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("plain GET: %d %v", resp.StatusCode, resp.Header)
	}
}

// mustGauge finds the one series of the metric name in reg.
func mustGauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.GaugeValue, mf.GetMetric()[0].GetGauge().GetValue())
				return
			}
		}
		t.Fatalf("no metric %s", name)
	})
}

type collectorFunc func(ch chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// The HTTP timeouts do not hold on a socket: it outlives them, idle and busy.
func TestWebSocketOutlivesHTTPTimeouts(t *testing.T) {
	addr, _, _ := wsServer(t, 0, func(c *Config) {
		c.HeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	})
	c := wsDial(t, addr, "/v1/web3/mainnet")
	time.Sleep(700 * time.Millisecond) // idle past idleTimeout and headerTimeout, with the watchdog's ticks
	if got := wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"slow"}`); got != `{"jsonrpc":"2.0","id":1,"result":null}` {
		t.Fatalf("after the HTTP timeouts: %s", got)
	}
}

// With server.websocket.enabled false, an upgrade is a GET like any other: 405.
func TestWebSocketDisabled(t *testing.T) {
	addr, _, _ := wsServer(t, 0, func(c *Config) { c.WebSocket.Enabled = false })
	_, resp, err := wsDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
	if err == nil || resp == nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("upgrade with WebSockets off: %v %v", err, resp)
	}
}

// A bearer token offered as a subprotocol authenticates the socket; the server selects
// web3gate and never echoes the token.
func TestWebSocketBearerSubprotocol(t *testing.T) {
	addr, _, _ := wsServer(t, 0, nil)
	c, resp, err := wsDialer("Sec-WebSocket-Protocol", "web3gate, bearer.tok").Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 1 || got[0] != "web3gate" || c.Subprotocol() != "web3gate" {
		t.Fatalf("selected %q", got)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the 101")
	}
}

// A subscription's notifications follow its answer, even those sent before the answer was
// queued; unsubscribing answers true once, then false.
func TestWebSocketSubscriptionOrder(t *testing.T) {
	addr, _, reg := wsServer(t, 0, nil)
	c := wsDial(t, addr, "/v1/web3/mainnet")
	answer := wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"sub"}`)
	var a struct{ Result string }
	if err := json.Unmarshal([]byte(answer), &a); err != nil || len(a.Result) != 34 || !strings.HasPrefix(a.Result, "0x") {
		t.Fatalf("answer %s", answer)
	}
	for i := range 3 {
		want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"%s","result":%d}}`, a.Result, i)
		if got := wsRead(t, c); got != want {
			t.Fatalf("notification %d: %s, want %s", i, got, want)
		}
	}
	if got := testutil.ToFloat64(mustVec(t, reg, "web3gate_websocket_subscriptions", "newHeads")); got != 1 {
		t.Errorf("subscriptions gauge %v", got)
	}
	for _, want := range []string{"true", "false"} {
		if got := wsCall(t, c, `{"jsonrpc":"2.0","id":2,"method":"unsub","params":["`+a.Result+`"]}`); got != `{"jsonrpc":"2.0","id":2,"result":`+want+`}` {
			t.Fatalf("unsub: %s, want %s", got, want)
		}
	}
	if got := testutil.ToFloat64(mustVec(t, reg, "web3gate_websocket_subscriptions", "newHeads")); got != 0 {
		t.Errorf("subscriptions gauge %v after unsubscribe", got)
	}
	// Another socket's id is not this one's.
	c2 := wsDial(t, addr, "/v1/web3/mainnet")
	id := wsCall(t, c2, `{"jsonrpc":"2.0","id":1,"method":"sub"}`)
	if got := wsCall(t, c, `{"jsonrpc":"2.0","id":3,"method":"unsub","params":[`+id[strings.Index(id, `"result":`)+9:len(id)-1]+`]}`); got != `{"jsonrpc":"2.0","id":3,"result":false}` {
		t.Fatalf("another socket's id: %s", got)
	}
}

// mustVec is the value of the series of name with the one label value.
func mustVec(t *testing.T, reg *prometheus.Registry, name, label string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == label {
					v := m.GetGauge().GetValue()
					if m.GetCounter() != nil {
						v = m.GetCounter().GetValue()
					}
					ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.GaugeValue, v)
					return
				}
			}
		}
		t.Fatalf("no series %s{%s}", name, label)
	})
}

func TestWebSocketSubscriptionLimit(t *testing.T) {
	addr, _, _ := wsServer(t, 0, func(c *Config) { c.WebSocket.MaxSubscriptionsPerConn = 2 })
	c := wsDial(t, addr, "/v1/web3/mainnet")
	got := wsCall(t, c, `[{"jsonrpc":"2.0","id":1,"method":"ticker","params":[1]},{"jsonrpc":"2.0","id":2,"method":"ticker","params":[1]},{"jsonrpc":"2.0","id":3,"method":"ticker","params":[1]}]`)
	// The calls of a batch run concurrently: any one of them may be the third.
	want := `"error":{"code":-32005,"message":"too many subscriptions: 2 are open on this connection, the most server.websocket.maxSubscriptionsPerConn allows; unsubscribe one or open another connection"}}`
	if strings.Count(got, want) != 1 || strings.Count(got, `"result":"0x`) != 2 {
		t.Fatalf("batch of three subscriptions: %s", got)
	}
}

func TestWebSocketCloses(t *testing.T) {
	t.Run("message too large", func(t *testing.T) {
		addr, _, reg := wsServer(t, 0, func(c *Config) { c.WebSocket.MaxMessageBytes = 4096 })
		c := wsDial(t, addr, "/v1/web3/mainnet")
		// A message of the limit is served; one byte more closes the socket.
		pad := strings.Repeat(" ", 4096-len(`{"jsonrpc":"2.0","id":1,"method":"echo"}`))
		if got := wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"echo"}`+pad); got != `{"jsonrpc":"2.0","id":1,"result":null}` {
			t.Fatalf("message of maxMessageBytes: %s", got)
		}
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"echo"}`+pad+" ")); err != nil {
			t.Fatal(err)
		}
		ce := wsClosed(t, c)
		if ce.Code != websocket.CloseMessageTooBig || ce.Text != "message exceeds server.websocket.maxMessageBytes (4096 bytes)" {
			t.Fatalf("close %d %q", ce.Code, ce.Text)
		}
		wait.For(t, "message_too_large counted", func() bool {
			return testutil.ToFloat64(mustVec(t, reg, "web3gate_websocket_dropped_total", "message_too_large")) == 1
		})
	})
	t.Run("binary message", func(t *testing.T) {
		addr, _, _ := wsServer(t, 0, nil)
		c := wsDial(t, addr, "/v1/web3/mainnet")
		if err := c.WriteMessage(websocket.BinaryMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"echo"}`)); err != nil {
			t.Fatal(err)
		}
		if ce := wsClosed(t, c); ce.Code != websocket.CloseUnsupportedData || ce.Text != closeBinary {
			t.Fatalf("close %d %q", ce.Code, ce.Text)
		}
	})
	t.Run("token expired", func(t *testing.T) {
		addr, _, _ := wsServer(t, 300*time.Millisecond, nil)
		c := wsDial(t, addr, "/v1/web3/mainnet", "Authorization", "Bearer short")
		wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"ticker","params":[1]}`)
		if ce := wsClosed(t, c); ce.Code != websocket.ClosePolicyViolation || ce.Text != "access token expired" {
			t.Fatalf("close %d %q", ce.Code, ce.Text)
		}
	})
	t.Run("idle", func(t *testing.T) {
		addr, _, _ := wsServer(t, 0, func(c *Config) { c.WebSocket.IdleTimeout = 300 * time.Millisecond })
		c := wsDial(t, addr, "/v1/web3/mainnet")
		// With a subscription the socket is not idle; once it ends, it is.
		id := wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"ticker","params":[1]}`)
		time.Sleep(600 * time.Millisecond)
		id = id[strings.Index(id, `"result":`)+9 : len(id)-1]
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":2,"method":"unsub","params":[`+id+`]}`)); err != nil {
			t.Fatal(err)
		}
		if ce := wsClosed(t, c); ce.Code != websocket.CloseNormalClosure || !strings.Contains(ce.Text, "idleTimeout (300ms)") {
			t.Fatalf("close %d %q", ce.Code, ce.Text)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		addr, s, _ := wsServer(t, 0, nil)
		c := wsDial(t, addr, "/v1/web3/mainnet")
		wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"ticker","params":[1]}`)
		// A message in progress is answered before the close.
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":"last","method":"slow"}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(context.Background()) }()
		answered := false
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, b, err := c.ReadMessage()
			if err == nil {
				answered = answered || strings.Contains(string(b), `"id":"last"`)
				continue
			}
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || ce.Text != "server shutting down" {
				t.Fatalf("read ended with %v", err)
			}
			break
		}
		if !answered {
			t.Error("the message in progress was not answered before the close")
		}
		if err := <-done; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	})
}

// A client that stops reading fills its queue and is closed (1008); another socket goes on.
func TestWebSocketSlowConsumer(t *testing.T) {
	addr, _, reg := wsServer(t, 0, func(c *Config) {
		c.WebSocket.QueueSize = 16
		c.WebSocket.WriteTimeout = 30 * time.Second
	})
	slow := wsDial(t, addr, "/v1/web3/mainnet")
	wsCall(t, slow, `{"jsonrpc":"2.0","id":1,"method":"ticker","params":[65536]}`)
	other := wsDial(t, addr, "/v1/web3/mainnet")
	wsCall(t, other, `{"jsonrpc":"2.0","id":1,"method":"ticker","params":[10]}`)
	// slow reads nothing until the server has given up on it.
	wait.For(t, "slow consumer dropped", func() bool {
		wsRead(t, other)
		return testutil.ToFloat64(mustVec(t, reg, "web3gate_websocket_dropped_total", "slow_consumer")) == 1
	})
	if ce := wsClosed(t, slow); ce.Code != websocket.ClosePolicyViolation || ce.Text != closeSlowConsumer {
		t.Fatalf("close %d %q", ce.Code, ce.Text)
	}
	for range 10 {
		if got := wsRead(t, other); !strings.Contains(got, `"result":"xxxxxxxxxx"`) {
			t.Fatalf("the other socket got %s", got)
		}
	}
}

// A client that reads slowly (a small receive buffer, a pause) gets every notification
// whole and in order: the writes that had to wait for room resumed where they stopped, and
// the pongs to its pings went between frames.
func TestWebSocketWritesResume(t *testing.T) {
	addr, _, _ := wsServer(t, 0, func(c *Config) { c.WebSocket.QueueSize = 4096 })
	c, _, err := smallBufDialer().Dial("ws://"+addr+"/v1/web3/mainnet", wsHeader())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const size, groups = 3000, 200
	var pongs atomic.Int32
	c.SetPongHandler(func(string) error { pongs.Add(1); return nil })
	if got := wsCall(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"burst","params":[%d,%d]}`, size, groups)); !strings.Contains(got, `"result":"0x`) {
		t.Fatalf("burst: %s", got)
	}
	time.Sleep(100 * time.Millisecond) // the server's writes fill the buffers meanwhile
	for n := range groups * 10 {
		if n%500 == 0 {
			if err := c.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		var note struct {
			Params struct{ Result string }
		}
		got := wsRead(t, c)
		if err := json.Unmarshal([]byte(got), &note); err != nil {
			t.Fatalf("notification %d: %v", n, err)
		}
		prefix := strconv.Itoa(n) + ":"
		if r := note.Params.Result; len(r) != size-2 || !strings.HasPrefix(r, prefix) {
			t.Fatalf("notification %d: %d bytes, starting %.20q", n, len(r), r)
		}
	}
	if pongs.Load() == 0 {
		t.Fatal("no pong read between the notifications")
	}
}

// A socket counts against server.maxConnsPerIP as the connection it was.
func TestWebSocketCountsAsConnection(t *testing.T) {
	addr, _, _ := wsServer(t, 0, func(c *Config) { c.MaxConnsPerIP = 1 })
	c := wsDial(t, addr, "/v1/web3/mainnet")
	other := dial(t, addr)
	if a := readAnswer(t, other, bufio.NewReader(other)); a.status != http.StatusTooManyRequests {
		t.Fatalf("a second connection while the socket is open: %d %s", a.status, a.body)
	}
	c.Close()
	wait.For(t, "the socket's connection counted out", func() bool {
		again := dial(t, addr)
		defer again.Close()
		a := roundTrip(t, again, bufio.NewReader(again), post("/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"echo"}`))
		return a.status == http.StatusOK
	})
}

// A peer that answers no ping is closed after twice the ping interval (long enough here
// that the reading peer, on a loaded machine, is never that late).
func TestWebSocketPingTimeout(t *testing.T) {
	addr, _, reg := wsServer(t, 0, func(c *Config) { c.WebSocket.PingInterval = 500 * time.Millisecond })
	c := wsDial(t, addr, "/v1/web3/mainnet")
	// A client that reads answers the pings: the socket stays open past the interval.
	go func() {
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}()
	quiet := wsDial(t, addr, "/v1/web3/mainnet") // reads nothing, so answers no ping
	wait.For(t, "the quiet peer closed", func() bool {
		return testutil.ToFloat64(mustVec(t, reg, "web3gate_websocket_dropped_total", "ping_timeout")) == 1
	})
	_ = quiet
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"echo"}`)); err != nil {
		t.Fatalf("the answering peer: %v", err)
	}
}
