package integration

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/wait"
)

// strangerToken is a static token of another principal than the dev one, accepted with the
// dev client id as any token is: client ids are public, so a stranger can use one.
const strangerToken = "stranger-access-token"

// capsConfig is devConfig with small WebSocket caps, the stranger's token, and loopback as
// the trusted proxy, so that X-Forwarded-For gives each upgrade the source address a test
// wants.
func capsConfig(t *testing.T, perClient, perPrincipal, perAddress string) string {
	t.Helper()
	cfg := devConfig(t)
	for old, v := range map[string]string{
		"maxConnsPerClient: 100":   "maxConnsPerClient: " + perClient,
		"maxConnsPerPrincipal: 20": "maxConnsPerPrincipal: " + perPrincipal,
		"maxConnsPerAddress: 50":   "maxConnsPerAddress: " + perAddress,
		"trustedProxies: []":       `trustedProxies: ["127.0.0.1"]`,
		"      principal: dev\n":   "      principal: dev\n    - sha256: " + sha256Hex(strangerToken) + "\n      principal: stranger\n",
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("config.yaml: %q not found", old)
		}
		cfg = strings.Replace(cfg, old, v, 1)
	}
	return cfg
}

// upgradeFrom dials a socket of the dev client id (in the URL, as a dApp's) with token, from
// the source address src. It returns the socket, served (eth_chainId answered), or nil and
// the refusal's status and body.
func upgradeFrom(t *testing.T, ts *testServer, token, src string) (*websocket.Conn, string) {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}, "X-Forwarded-For": {src}}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(wsURL(ts, "/v1/web3/mainnet/"+config.DevClientID), h)
	if err != nil {
		return nil, answerOf(resp)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := conn.ReadMessage()
	if err != nil || string(b) != `{"jsonrpc":"2.0","id":1,"result":"0x539"}` {
		t.Fatalf("socket of %s from %s: %s %v", token, src, b, err)
	}
	return conn, "101"
}

// A stranger who knows an app's client id and holds a token of their own opens all the
// sockets their principal may: the app's users (the dev principal) still get the client id's
// other sockets. Over their own caps, a principal and an address are refused (429, naming the
// key) without using up the client id's sockets; a closed socket is counted out.
func TestWebSocketStrangerCannotExhaustClientID(t *testing.T) {
	ts := startServer(t, capsConfig(t, "5", "3", "2"))
	const (
		principalFull = `429 {"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"too many WebSockets: 3 are open for this access token's principal, the most server.websocket.maxConnsPerPrincipal allows; close one or retry later"}}`
		addressFull   = `429 {"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"too many WebSockets: 2 are open from this address, the most server.websocket.maxConnsPerAddress allows; close one or retry later"}}`
		clientFull    = `429 {"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"too many WebSockets: 5 are open for this client id, the most server.websocket.maxConnsPerClient allows; close one or retry later"}}`
	)
	steps := []struct {
		name, token, src, want string
	}{
		// The stranger opens all they may, and keeps trying from other addresses.
		{"stranger 1", strangerToken, "198.51.100.1", "101"},
		{"stranger 2", strangerToken, "198.51.100.1", "101"},
		{"stranger, third from one address", strangerToken, "198.51.100.1", addressFull},
		{"stranger 3", strangerToken, "198.51.100.2", "101"},
		{"stranger 4", strangerToken, "198.51.100.3", principalFull},
		{"stranger 5", strangerToken, "198.51.100.4", principalFull},
		// The app's users get the client id's other sockets, none taken by those refusals.
		{"dev 1", config.DevToken, "203.0.113.1", "101"},
		{"dev 2", config.DevToken, "203.0.113.2", "101"},
		// Now the client id's cap is reached.
		{"dev 3", config.DevToken, "203.0.113.3", clientFull},
	}
	var first *websocket.Conn
	for i, st := range steps {
		c, got := upgradeFrom(t, ts, st.token, st.src)
		if got != st.want {
			t.Fatalf("%s: %s, want %s", st.name, got, st.want)
		}
		if i == 0 {
			first = c
		}
	}
	for reason, want := range map[string]float64{"websockets_per_principal": 2, "websockets_per_address": 1, "websockets_per_client": 1} {
		if got := metric(t, ts.Admin, `web3gate_server_refused_total{reason="`+reason+`"}`); got != want {
			t.Errorf("web3gate_server_refused_total{reason=%q} %v, want %v", reason, got, want)
		}
	}
	// The stranger closes one: the client id has room again.
	_ = first.Close()
	wait.For(t, "the stranger's socket counted out", func() bool {
		c, _ := upgradeFrom(t, ts, config.DevToken, "203.0.113.3")
		return c != nil
	})
}

// With the shipped caps, one principal alone cannot reach the client id's cap: the stranger
// is refused at maxConnsPerPrincipal (20), and the app's principal gets sockets after.
func TestWebSocketShippedCapsLeaveRoom(t *testing.T) {
	ts := startServer(t, capsConfig(t, "100", "20", "50"))
	for i := range 20 {
		if _, got := upgradeFrom(t, ts, strangerToken, "198.51.100."+strconv.Itoa(i)); got != "101" {
			t.Fatalf("stranger's socket %d: %s", i, got)
		}
	}
	if _, got := upgradeFrom(t, ts, strangerToken, "198.51.100.200"); !strings.Contains(got, "server.websocket.maxConnsPerPrincipal") {
		t.Fatalf("stranger's 21st socket: %s", got)
	}
	for i := range 20 {
		if _, got := upgradeFrom(t, ts, config.DevToken, "203.0.113."+strconv.Itoa(i)); got != "101" {
			t.Fatalf("dev socket %d: %s", i, got)
		}
	}
}

// Two different client ids in one request are refused (401, 4100), over HTTP and at the
// WebSocket upgrade, wherever they are: X-API-Key headers, the path, the apiKey query
// parameter, the query key repeated; and on the transaction routes. The same id repeated is
// served.
func TestTwoClientIDsRefused(t *testing.T) {
	ts := startServer(t, devConfig(t))
	const refused = `401 {"jsonrpc":"2.0","id":1,"error":{"code":4100,"message":"Not Authorized: the request carries different client ids (X-API-Key header, URL path segment, apiKey query parameter)"}}`
	const refusedUpgrade = `401 {"jsonrpc":"2.0","id":null,"error":{"code":4100,"message":"Not Authorized: the request carries different client ids (X-API-Key header, URL path segment, apiKey query parameter)"}}`
	const dev, other = config.DevClientID, "someone-else"
	type place struct {
		name, path string
		keys       []string // X-API-Key headers
	}
	conflicts := []place{
		{"two headers", "/v1/web3/mainnet", []string{dev, other}},
		{"two headers, the other first", "/v1/web3/mainnet", []string{other, dev}},
		{"header and path", "/v1/web3/mainnet/" + other, []string{dev}},
		{"header and query", "/v1/web3/chains/1337?apiKey=" + other, []string{dev}},
		{"path and query", "/v1/web3/chains/1337/" + dev + "?apiKey=" + other, nil},
		{"query key repeated", "/v1/web3/mainnet?apiKey=" + dev + "&apiKey=" + other, nil},
		{"query key repeated, the other first", "/v1/web3/mainnet?apiKey=" + other + "&apiKey=" + dev, nil},
	}
	same := []place{
		{"two headers", "/v1/web3/mainnet", []string{dev, dev}},
		{"header, path and query", "/v1/web3/mainnet/" + dev + "?apiKey=" + dev, []string{dev}},
		{"query key repeated", "/v1/web3/mainnet?apiKey=" + dev + "&apiKey=" + dev, nil},
	}
	header := func(keys []string) http.Header {
		h := http.Header{"Authorization": {"Bearer " + config.DevToken}, "Content-Type": {"application/json"}}
		if keys != nil {
			h["X-Api-Key"] = keys
		}
		return h
	}
	post := func(t *testing.T, p place) string {
		req, err := http.NewRequest(http.MethodPost, ts.API+p.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header(p.keys)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	upgrade := func(t *testing.T, p place) string {
		h := header(p.keys)
		h.Del("Content-Type")
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
		conn, resp, err := d.Dial(wsURL(ts, p.path), h)
		if err != nil {
			return answerOf(resp)
		}
		defer conn.Close()
		if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return "101 " + string(b)
	}
	for _, p := range conflicts {
		t.Run("HTTP, "+p.name, func(t *testing.T) {
			if got := post(t, p); got != refused {
				t.Fatalf("%s, want %s", got, refused)
			}
		})
		t.Run("WebSocket, "+p.name, func(t *testing.T) {
			if got := upgrade(t, p); got != refusedUpgrade {
				t.Fatalf("%s, want %s", got, refusedUpgrade)
			}
		})
	}
	// The transaction routes take the client id from X-API-Key only: two different are refused.
	t.Run("REST, two headers", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, ts.API+"/v1/transactions/0x"+strings.Repeat("00", 32), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header([]string{dev, other})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "the request carries different client ids") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})
	for _, p := range same {
		t.Run("HTTP, same id, "+p.name, func(t *testing.T) {
			if got, want := post(t, p), `200 {"jsonrpc":"2.0","id":1,"result":"0x539"}`; got != want {
				t.Fatalf("%s, want %s", got, want)
			}
		})
		t.Run("WebSocket, same id, "+p.name, func(t *testing.T) {
			if got, want := upgrade(t, p), `101 {"jsonrpc":"2.0","id":1,"result":"0x539"}`; got != want {
				t.Fatalf("%s, want %s", got, want)
			}
		})
	}
}
