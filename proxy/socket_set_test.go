package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/internal/wait"
)

// upgradeAs dials a socket on /v1/web3/mainnet for the client id cid with the bearer token
// tok ("" for none) from the source address src, which the test server's trusted proxy
// (127.0.0.1) names in X-Forwarded-For. It returns the socket (closed when the test ends),
// or nil and the HTTP status and body of the refusal.
func upgradeAs(t *testing.T, addr, tok, src string) (*websocket.Conn, int, string) {
	t.Helper()
	h := http.Header{"X-Api-Key": {"cid"}, "X-Forwarded-For": {src}}
	if tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	c, resp, err := wsDialer().Dial("ws://"+addr+"/v1/web3/mainnet", h)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
		return c, http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatalf("no HTTP answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return nil, resp.StatusCode, string(b)
}

// The caps of a principal and of a source address are checked before the client id's: a
// principal or an address over its own cap is refused (429, naming its key) without using up
// the client id's sockets, which the other principals and addresses still get; a socket that
// closes is counted out of all three.
func TestWebSocketCapsPerPrincipalAndAddress(t *testing.T) {
	addr, _, reg := wsServer(t, 0, func(c *Config) {
		c.TrustedProxies = []string{"127.0.0.1"}
		c.WebSocket.MaxConnsPerClient = 5
		c.WebSocket.MaxConnsPerPrincipal = 2
		c.WebSocket.MaxConnsPerAddress = 3
	})
	const (
		principalFull = `"code":-32005,"message":"too many WebSockets: 2 are open for this access token's principal, the most server.websocket.maxConnsPerPrincipal allows; close one or retry later"`
		addressFull   = `"code":-32005,"message":"too many WebSockets: 3 are open from this address, the most server.websocket.maxConnsPerAddress allows; close one or retry later"`
		clientFull    = `"code":-32005,"message":"too many WebSockets: 5 are open for this client id, the most server.websocket.maxConnsPerClient allows`
	)
	steps := []struct {
		tok, src string
		status   int
		body     string
	}{
		{"tok", "10.0.0.1", 101, ""},
		{"tok", "10.0.0.1", 101, ""},
		{"tok", "10.0.0.2", 429, principalFull}, // alice's third, from another address
		{"tok", "10.0.0.3", 429, principalFull}, // and again: refusals are not counted
		{"tok2", "10.0.0.1", 101, ""},           // bob gets his, from alice's address
		{"", "10.0.0.1", 429, addressFull},      // the address's fourth
		{"tok2", "10.0.0.2", 101, ""},           // bob's second
		{"", "10.0.0.3", 101, ""},               // the client id's fifth
		{"", "10.0.0.4", 429, clientFull},
	}
	var first *websocket.Conn
	for i, st := range steps {
		c, status, body := upgradeAs(t, addr, st.tok, st.src)
		if status != st.status || !strings.Contains(body, st.body) {
			t.Fatalf("step %d (token %q from %s): %d %s, want %d %s", i, st.tok, st.src, status, body, st.status, st.body)
		}
		if i == 0 {
			first = c
		}
	}
	for reason, want := range map[string]float64{"websockets_per_principal": 2, "websockets_per_address": 1, "websockets_per_client": 1} {
		if got := testutil.ToFloat64(mustVec(t, reg, "web3gate_server_refused_total", reason)); got != want {
			t.Errorf("web3gate_server_refused_total{reason=%s} %v, want %v", reason, got, want)
		}
	}
	// alice closes one: she, her address and the client id each have a socket free again.
	_ = first.Close()
	wait.For(t, "alice's socket counted out", func() bool {
		c, status, _ := upgradeAs(t, addr, "tok", "10.0.0.1")
		if c != nil {
			_ = c.Close()
		}
		return status == http.StatusSwitchingProtocols
	})
}

// With the default caps one principal cannot take all of a client id's sockets, nor can one
// address: the client id is public, and another principal (or address) still gets sockets
// once one has opened all it may.
func TestWebSocketDefaultCapsLeaveRoom(t *testing.T) {
	addr, s, _ := wsServer(t, 0, func(c *Config) { c.TrustedProxies = []string{"127.0.0.1"} })
	w := s.cfg.WebSocket
	if w.MaxConnsPerPrincipal >= w.MaxConnsPerClient || w.MaxConnsPerAddress >= w.MaxConnsPerClient {
		t.Fatalf("default caps: principal %d, address %d, client id %d", w.MaxConnsPerPrincipal, w.MaxConnsPerAddress, w.MaxConnsPerClient)
	}
	for i := range w.MaxConnsPerPrincipal {
		if _, status, body := upgradeAs(t, addr, "tok", fmt.Sprintf("10.0.1.%d", i)); status != http.StatusSwitchingProtocols {
			t.Fatalf("alice's socket %d: %d %s", i, status, body)
		}
	}
	if _, status, body := upgradeAs(t, addr, "tok", "10.0.2.1"); status != http.StatusTooManyRequests || !strings.Contains(body, "server.websocket.maxConnsPerPrincipal") {
		t.Fatalf("alice over her cap: %d %s", status, body)
	}
	for i := range w.MaxConnsPerAddress {
		if _, status, body := upgradeAs(t, addr, "", "10.0.3.1"); status != http.StatusSwitchingProtocols {
			t.Fatalf("address socket %d: %d %s", i, status, body)
		}
	}
	if _, status, body := upgradeAs(t, addr, "", "10.0.3.1"); status != http.StatusTooManyRequests || !strings.Contains(body, "server.websocket.maxConnsPerAddress") {
		t.Fatalf("address over its cap: %d %s", status, body)
	}
	if _, status, body := upgradeAs(t, addr, "tok2", "10.0.3.1"); status != http.StatusTooManyRequests || !strings.Contains(body, "server.websocket.maxConnsPerAddress") {
		t.Fatalf("bob from the full address: %d %s", status, body)
	}
	if _, status, body := upgradeAs(t, addr, "tok2", "10.0.4.1"); status != http.StatusSwitchingProtocols {
		t.Fatalf("bob: %d %s", status, body)
	}
}

// Without server.trustedProxies X-Forwarded-For is the client's to write: the TCP peer is the
// address counted, whatever the header says.
func TestWebSocketAddressCapIgnoresUntrustedForwardedFor(t *testing.T) {
	addr, _, _ := wsServer(t, 0, func(c *Config) { c.WebSocket.MaxConnsPerAddress = 2 })
	for i := range 2 {
		if _, status, body := upgradeAs(t, addr, "", fmt.Sprintf("10.0.5.%d", i)); status != http.StatusSwitchingProtocols {
			t.Fatalf("socket %d: %d %s", i, status, body)
		}
	}
	if _, status, body := upgradeAs(t, addr, "", "10.0.5.9"); status != http.StatusTooManyRequests || !strings.Contains(body, "server.websocket.maxConnsPerAddress") {
		t.Fatalf("third socket from 127.0.0.1: %d %s", status, body)
	}
}

// An upgrade that carries two different client ids, wherever they are, is refused as a POST
// is (401, 4100).
func TestWebSocketTwoClientIDs(t *testing.T) {
	addr, _, _ := wsServer(t, 0, nil)
	const refused = `"code":4100,"message":"Not Authorized: the request carries different client ids"`
	for _, tc := range []struct {
		name, path string
		keys       []string // X-API-Key headers
	}{
		{"two headers", "/v1/web3/mainnet", []string{"cid", "other"}},
		{"header and path", "/v1/web3/mainnet/other", []string{"cid"}},
		{"header and query", "/v1/web3/mainnet?apiKey=other", []string{"cid"}},
		{"path and query", "/v1/web3/mainnet/cid?apiKey=other", nil},
		{"repeated query key", "/v1/web3/mainnet?apiKey=cid&apiKey=other", nil},
		{"repeated query key, other first", "/v1/web3/mainnet?apiKey=other&apiKey=cid", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp, err := wsDialer().Dial("ws://"+addr+tc.path, http.Header{"X-Api-Key": tc.keys})
			if err == nil {
				_ = c.Close()
				t.Fatal("upgraded")
			}
			if resp == nil {
				t.Fatalf("no HTTP answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), refused) {
				t.Fatalf("%d %s, want 401 with %s", resp.StatusCode, b, refused)
			}
		})
	}
}

// The same client id in several places is one client id: the upgrade is served.
func TestWebSocketSameClientIDTwice(t *testing.T) {
	addr, _, _ := wsServer(t, 0, nil)
	for _, tc := range []struct {
		name, path string
		keys       []string // X-API-Key headers
	}{
		{"two headers", "/v1/web3/mainnet", []string{"cid", "cid"}},
		{"repeated query key", "/v1/web3/mainnet?apiKey=cid&apiKey=cid", nil},
		{"path, query and header", "/v1/web3/mainnet/cid?apiKey=cid", []string{"cid"}},
		{"empty query value beside the path", "/v1/web3/mainnet/cid?apiKey=", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp, err := wsDialer().Dial("ws://"+addr+tc.path, http.Header{"X-Api-Key": tc.keys})
			if err != nil {
				t.Fatalf("refused: %v %v", err, resp)
			}
			defer c.Close()
			if got := wsCall(t, c, `{"jsonrpc":"2.0","id":1,"method":"echo"}`); got != `{"jsonrpc":"2.0","id":1,"result":null}` {
				t.Fatalf("answer %s", got)
			}
		})
	}
}
