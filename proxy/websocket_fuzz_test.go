package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"runtime"
	"testing"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// fuzzTerminal is wsTerminal without its methods that sleep (slow) or start goroutines
// (ticker).
func fuzzTerminal() Handler {
	h := wsTerminal()
	return HandlerFunc(func(c *Call) (*Response, error) {
		if c.Request.Method == "slow" || c.Request.Method == "ticker" {
			return nil, jsonrpc.ErrMethodNotFound
		}
		return h.Serve(c)
	})
}

// FuzzWebSocketMessage feeds arbitrary messages, text or binary, to a socket's message
// handler (no connection: what it would write stays queued). Whatever the bytes: no panic,
// and either the socket closes (1003 binary, 1009 too large) or the message gets exactly one
// JSON-RPC answer, an object or an array, first in the queue (then the notifications of the
// subscriptions it made), or none when every call of a valid message is a notification.
func FuzzWebSocketMessage(f *testing.F) {
	var cfg Config
	cfg.SetDefaults()
	cfg.WebSocket.Enabled = true
	cfg.WebSocket.MaxMessageBytes = 4096
	cfg.MaxBatch = 10
	s, err := New(cfg, Deps{
		Logger:     zap.NewNop(),
		Registry:   prometheus.NewRegistry(),
		Routes:     []*Route{{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet", ChainID: 1, Handler: fuzzTerminal()}},
		KnownChain: func(uint64) bool { return false },
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}`,
		`[{"jsonrpc":"2.0","id":1,"method":"sub"},{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":2,"method":"nope"}]`,
		`{"jsonrpc":"2.0","method":"sub"}`,
		`[{"jsonrpc":"2.0","method":"echo"}]`,
		`[]`, `[1]`, `{`, ``, `null`, `"x"`,
		`{"jsonrpc":"2.0","id":1,"method":"unsub","params":["0x00"]}`,
	} {
		f.Add(uint8(websocket.TextMessage), []byte(seed))
	}
	f.Add(uint8(websocket.BinaryMessage), []byte(`{"jsonrpc":"2.0","id":1,"method":"echo"}`))
	f.Add(uint8(websocket.TextMessage), bytes.Repeat([]byte(" "), 4097))
	f.Fuzz(func(t *testing.T, typ uint8, msg []byte) {
		k := newSocket(s, nil, nil, &upgrade{route: s.router.routes[0], chainID: 1, hdr: reqHeaders{clientID: []byte("cid")}, owner: socketOwner{client: "cid"}})
		mt := websocket.TextMessage
		if typ%2 == 1 {
			mt = websocket.BinaryMessage
		}
		if !k.message(mt, bytes.NewReader(msg)) {
			t.Fatal("a message read whole reported a broken connection")
		}
		for k.inflight.Load() != 0 { // served on a goroutine: its answer is queued
			runtime.Gosched()
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.closeFrame != nil {
			code := binary.BigEndian.Uint16(k.closeFrame)
			if !(code == websocket.CloseUnsupportedData && mt == websocket.BinaryMessage) && !(code == websocket.CloseMessageTooBig && len(msg) > 4096) {
				t.Fatalf("close %d for a %d-byte message of type %d", code, len(msg), mt)
			}
			return
		}
		m, perr := jsonrpc.Parse(msg, cfg.MaxBatch)
		silent := perr == nil && len(m.Requests) > 0
		for _, r := range m.Requests {
			silent = silent && r.Notification()
		}
		if silent {
			for _, q := range k.queue {
				if q.prefix == nil {
					t.Fatalf("a message of notifications was answered: %s", q.body)
				}
			}
			return
		}
		if len(k.queue) == 0 || k.queue[0].prefix != nil {
			t.Fatalf("no answer to %q", msg)
		}
		a := k.queue[0].body
		if !json.Valid(a) || (a[0] != '{' && a[0] != '[') {
			t.Fatalf("answer %q to %q", a, msg)
		}
		for _, q := range k.queue[1:] {
			if q.prefix == nil {
				t.Fatalf("two answers to %q", msg)
			}
		}
	})
}
