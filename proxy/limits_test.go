package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// limitServer serves, with cfg: a JSON-RPC route /v1/web3/mainnet whose calls answer the
// length of their params (method "deny": 401), the JSON-RPC route /v1/web3/chains/{chain_id}
// (no chain is known), and REST routes /v1/echo/{what} whose GET answers the number of values
// of the query parameter {what} and POST the length of its body.
func limitServer(t *testing.T, cfg Config) (string, *Server) {
	t.Helper()
	rpc := HandlerFunc(func(c *Call) (*Response, error) {
		if c.Request.Method == "deny" {
			return nil, jsonrpc.ErrUnauthorized.With("Not Authorized: a bearer access token is required")
		}
		return &Response{Result: strconv.AppendInt(nil, int64(len(c.Request.Params)), 10)}, nil
	})
	echo := RESTHandlerFunc(func(r *RESTRequest) (*RESTResponse, error) {
		n := len(r.Body)
		if r.Method == http.MethodGet {
			n = len(r.QueryList(r.Params.Get("what")))
		}
		return &RESTResponse{Member: "echo", Body: strconv.AppendInt(nil, int64(n), 10)}, nil
	})
	return serveServer(t, cfg,
		&Route{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet", ChainID: 1, Handler: rpc},
		&Route{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}", Handler: rpc},
		&Route{Name: "echo", Method: http.MethodGet, Pattern: "/v1/echo/{what}", REST: echo},
		&Route{Name: "echo_post", Method: http.MethodPost, Pattern: "/v1/echo/{what}", REST: echo})
}

// dialFrom connects to addr from the loopback address ip, for the length of the test.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   string
	close  bool
}

// roundTrip writes raw on c and reads the answer.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) answer {
	t.Helper()
	if raw != "" {
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	return readAnswer(t, c, br)
}

func readAnswer(t *testing.T, c net.Conn, br *bufio.Reader) answer {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), close: resp.Close}
}

// rpcBody is a JSON-RPC request of n bytes whose params are one string.
func rpcBody(n int) string {
	head, tail := `{"jsonrpc":"2.0","id":1,"method":"m","params":["`, `"]}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

func post(path string, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
}

// restError decodes the REST error object of an answer.
func restError(t *testing.T, a answer) RESTError {
	t.Helper()
	var v struct{ Error *RESTError }
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.Error == nil {
		t.Fatalf("not a REST error object: %.300s", a.body)
	}
	return *v.Error
}

// rpcError decodes the JSON-RPC error of an answer with id null.
func rpcError(t *testing.T, a answer) jsonrpc.Error {
	t.Helper()
	var v struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.JSONRPC != "2.0" || string(v.ID) != "null" || v.Error == nil {
		t.Fatalf("not a JSON-RPC error with id null: %.300s", a.body)
	}
	return jsonrpc.Error{Code: v.Error.Code, Message: v.Error.Message}
}

// A connection over server.maxConnsPerIP (counted per source address) is answered 429 and
// closed before anything is read; one over server.maxConns 503; a closed connection frees
// its place.
func TestConnectionLimits(t *testing.T) {
	addr, s := limitServer(t, Config{MaxConns: 3, MaxConnsPerIP: 2})
	served := func(c net.Conn) {
		t.Helper()
		if a := roundTrip(t, c, bufio.NewReader(c), "GET /v1/echo/x HTTP/1.1\r\nHost: a\r\n\r\n"); a.status != 200 {
			t.Fatalf("answer %d %s, want 200", a.status, a.body)
		}
	}
	refused := func(c net.Conn, status int, message string) {
		t.Helper()
		br := bufio.NewReader(c)
		a := readAnswer(t, c, br)
		if e := rpcError(t, a); a.status != status || e.Code != -32005 || !strings.Contains(e.Message, message) ||
			a.header.Get("Retry-After") != "1" || !a.close {
			t.Fatalf("answer %d %v %s, want %d -32005 %q with Retry-After and Connection: close", a.status, a.header, a.body, status, message)
		}
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("refused connection still open: %d, %v", n, err)
		}
	}
	first := dialFrom(t, "127.0.0.1", addr)
	served(first)
	served(dialFrom(t, "127.0.0.1", addr))
	refused(dialFrom(t, "127.0.0.1", addr), http.StatusTooManyRequests, "2 are open from this address")
	served(dialFrom(t, "127.0.0.2", addr)) // another address has its own count
	refused(dialFrom(t, "127.0.0.3", addr), http.StatusServiceUnavailable, "3 connections are open")
	if got := s.limits.count(); got != 3 {
		t.Fatalf("%d connections counted, want 3", got)
	}

	_ = first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.limits.count() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the closed connection is still counted (%d open)", s.limits.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
	served(dialFrom(t, "127.0.0.1", addr))
}

// A body that does not come whole with the head is read as it arrives: it takes from
// server.maxBodyBytesInFlight what its buffer holds (grown with the bytes received, not
// the length declared), and a body that would exceed the budget is answered 503 with
// Retry-After, in the shape of its route. Once the bodies are answered, the budget is back.
func TestBodyBudget(t *testing.T) {
	addr, s := limitServer(t, Config{MaxBodyBytes: 48 << 10, MaxBodyBytesInFlight: 64 << 10, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second})
	// A declares 40 KiB, sends half and stalls: its buffer holds 32 KiB.
	a := dialFrom(t, "127.0.0.1", addr)
	body := strings.Repeat("b", 40<<10)
	raw := post("/v1/echo/a", body)
	if _, err := io.WriteString(a, raw[:len(raw)-20<<10]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.budget.used.Load() != 32<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("body bytes in flight %d, want 32 KiB", s.budget.used.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// B's 40 KiB do not fit beside them.
	b := dialFrom(t, "127.0.0.1", addr)
	got := roundTrip(t, b, bufio.NewReader(b), post("/v1/web3/mainnet", rpcBody(40<<10)))
	if e := rpcError(t, got); got.status != http.StatusServiceUnavailable || e.Code != -32005 || !strings.Contains(e.Message, "retry later") ||
		got.header.Get("Retry-After") != "1" || !got.close {
		t.Fatalf("JSON-RPC: %d %v %s, want 503 -32005 with Retry-After", got.status, got.header, got.body)
	}
	b = dialFrom(t, "127.0.0.1", addr)
	got = roundTrip(t, b, bufio.NewReader(b), post("/v1/echo/b", body))
	if e := restError(t, got); got.status != http.StatusServiceUnavailable || e.Code != 503 || got.header.Get("Retry-After") != "1" {
		t.Fatalf("REST: %d %v %s, want 503 with Retry-After", got.status, got.header, got.body)
	}

	// A completes; then B fits.
	got = roundTrip(t, a, bufio.NewReader(a), raw[len(raw)-20<<10:])
	if got.status != 200 || got.body != `{"echo":40960,"error":null}` {
		t.Fatalf("A: %d %s", got.status, got.body)
	}
	if n := s.budget.used.Load(); n != 0 {
		t.Fatalf("%d bytes in flight once answered", n)
	}
	b = dialFrom(t, "127.0.0.1", addr)
	if got = roundTrip(t, b, bufio.NewReader(b), post("/v1/web3/mainnet", rpcBody(40<<10))); got.status != 200 {
		t.Fatalf("B after A: %d %s", got.status, got.body)
	}
}

// Bodies of every size and framing reach the routes whole, and the connection carries the
// next request; a body over server.maxBodyBytes is answered 413 without being waited for.
func TestStreamedBodies(t *testing.T) {
	addr, s := limitServer(t, Config{MaxBodyBytes: 1 << 20, MaxBodyBytesInFlight: 4 << 20})
	chunked := func(path, body string) string {
		var sb strings.Builder
		fmt.Fprintf(&sb, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", path)
		for len(body) > 0 {
			n := min(len(body), 3000)
			fmt.Fprintf(&sb, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		sb.WriteString("0\r\n\r\n")
		return sb.String()
	}
	for _, size := range []int{100, streamedBodyOver, streamedBodyOver + 1, 100 << 10, 1 << 20} {
		body := rpcBody(size)
		params := len(body) - len(`{"jsonrpc":"2.0","id":1,"method":"m","params":}`)
		for _, tc := range []struct{ name, raw, want string }{
			{"json-rpc", post("/v1/web3/mainnet", body), fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":%d}`, params)},
			{"json-rpc chunked", chunked("/v1/web3/mainnet", body), fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":%d}`, params)},
			{"rest", post("/v1/echo/x", body), fmt.Sprintf(`{"echo":%d,"error":null}`, size)},
			{"rest chunked", chunked("/v1/echo/x", body), fmt.Sprintf(`{"echo":%d,"error":null}`, size)},
		} {
			t.Run(fmt.Sprintf("%s %d", tc.name, size), func(t *testing.T) {
				c := dialFrom(t, "127.0.0.1", addr)
				br := bufio.NewReader(c)
				for range 2 { // the connection carries the next request
					if a := roundTrip(t, c, br, tc.raw); a.status != 200 || a.body != tc.want || a.close {
						t.Fatalf("%d %.200s (close %v), want 200 %s", a.status, a.body, a.close, tc.want)
					}
				}
			})
		}
	}
	t.Run("over the limit", func(t *testing.T) {
		over := "POST /v1/web3/mainnet HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n" + strings.Repeat("a", streamedBodyOver)
		for _, raw := range []string{
			over, // the answer does not wait for the rest of the body
			chunked("/v1/web3/mainnet", rpcBody(1<<20+1)),
		} {
			c := dialFrom(t, "127.0.0.1", addr)
			a := roundTrip(t, c, bufio.NewReader(c), raw)
			if e := rpcError(t, a); a.status != http.StatusRequestEntityTooLarge || e.Message != "request body exceeds 1048576 bytes" || !a.close {
				t.Fatalf("%d %s, want 413 and the connection closed", a.status, a.body)
			}
		}
		c := dialFrom(t, "127.0.0.1", addr)
		a := roundTrip(t, c, bufio.NewReader(c), strings.Replace(over, "/v1/web3/mainnet", "/v1/echo/x", 1))
		if e := restError(t, a); a.status != http.StatusRequestEntityTooLarge || e.Message != "request body exceeds 1048576 bytes" {
			t.Fatalf("REST: %d %s, want 413", a.status, a.body)
		}
	})
	if n := s.budget.used.Load(); n != 0 {
		t.Fatalf("%d bytes in flight once answered", n)
	}
}

// A request answered without reading its body (here: no such route) closes its
// connection: the rest of the body is never read as the next request.
func TestUnreadBodyClosesConnection(t *testing.T) {
	addr, _ := limitServer(t, Config{MaxBodyBytes: 1 << 20})
	smuggled := "GET /v1/echo/smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
	body := strings.Repeat(" ", 2*streamedBodyOver) + smuggled + strings.Repeat(" ", 100)
	c := dialFrom(t, "127.0.0.1", addr)
	br := bufio.NewReader(c)
	a := roundTrip(t, c, br, post("/v1/nowhere", body))
	if a.status != http.StatusNotFound || !a.close {
		t.Fatalf("%d %s (close %v), want 404 and the connection closed", a.status, a.body, a.close)
	}
	if rest, err := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("after the answer: %q, %v", rest, err)
	}
}

// The head of a request may fill server.maxHeaderBytes (long bearer tokens, the owners
// route's 100 contract addresses); beyond, a request line that does not fit is answered
// 414 and header fields that do not fit 431, in the REST error object on REST routes and
// the JSON-RPC error shape on JSON-RPC routes.
func TestHeadLimits(t *testing.T) {
	addr, _ := limitServer(t, Config{MaxHeaderBytes: 16 << 10})
	addrs := make([]string, 100)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("0x%040x", i)
	}
	owners := "contractAddresses=" + strings.Join(addrs, ",") + "&" + "contractAddresses=" + strings.Join(addrs, "&contractAddresses=")
	long := strings.Repeat("x", 40<<10)
	rpc := rpcBody(100)
	for _, tc := range []struct {
		name, raw string
		status    int
		rest      bool // the answer is a REST error object, else the JSON-RPC one
		want      string
	}{
		{"12 KB token", "POST /v1/web3/mainnet HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + strings.Repeat("t", 12000) + "\r\nContent-Length: 100\r\n\r\n" + rpc, 200, false, `{"jsonrpc":"2.0","id":1,"result":53}`},
		{"100 contract addresses, twice", "GET /v1/echo/contractAddresses?" + owners + " HTTP/1.1\r\nHost: a\r\n\r\n", 200, true, `{"echo":200,"error":null}`},
		{"40 KB header, JSON-RPC", "POST /v1/web3/mainnet HTTP/1.1\r\nHost: a\r\nX-Big: " + long + "\r\nContent-Length: 100\r\n\r\n" + rpc, 431, false, "request header fields too large"},
		{"40 KB header, REST", "GET /v1/echo/x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + long + "\r\n\r\n", 431, true, "request header fields too large"},
		{"40 KB URI, REST", "GET /v1/echo/owners?contractAddresses=" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, true, "request URI too long"},
		{"40 KB path, REST", "GET /v1/echo/" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, true, "request URI too long"},
		{"40 KB URI, JSON-RPC", "POST /v1/web3/chains/1?x=" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, false, "request URI too long"},
		{"40 KB URI, absolute form", "POST http://a/v1/web3/mainnet?x=" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, false, "request URI too long"},
		{"40 KB URI, no route", "GET /nowhere?x=" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, true, "request URI too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.1", addr)
			a := roundTrip(t, c, bufio.NewReader(c), tc.raw)
			if a.status != tc.status || a.header.Get("X-Request-Id") == "" {
				t.Fatalf("%d %.300s, want %d", a.status, a.body, tc.status)
			}
			switch {
			case tc.status == 200:
				if a.body != tc.want {
					t.Fatalf("%s, want %s", a.body, tc.want)
				}
			case tc.rest:
				if e := restError(t, a); e.Code != tc.status || !strings.HasPrefix(e.Message, tc.want) || e.Request != a.header.Get("X-Request-Id") {
					t.Fatalf("%+v, want %d %q", e, tc.status, tc.want)
				}
			default:
				if e := rpcError(t, a); e.Code != -32600 || !strings.HasPrefix(e.Message, tc.want) || !strings.Contains(e.Message, "16384 bytes") {
					t.Fatalf("%+v, want -32600 %q", e, tc.want)
				}
			}
		})
	}
}

// A client that sends all of a head the server refused (a 200 KB URI), then reads the
// answer, as HTTP clients do, gets the 414 and then the end of the stream, not a connection
// reset (which can also reach a client before the answer, and did in a whole-server test):
// the server half-closes and reads what follows before it closes (lingerClose).
func TestRefusedHeadLingers(t *testing.T) {
	addr, _ := limitServer(t, Config{MaxHeaderBytes: 16 << 10})
	raw := "GET /v1/echo/owners?contractAddresses=" + strings.Repeat("0", 200<<10) + " HTTP/1.1\r\nHost: a\r\n\r\n"
	for i := range 10 {
		c := dialFrom(t, "127.0.0.1", addr)
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatalf("attempt %d: write: %v", i+1, err)
		}
		br := bufio.NewReader(c)
		a := roundTrip(t, c, br, "")
		if a.status != http.StatusRequestURITooLong {
			t.Fatalf("attempt %d: %d %.200s, want 414", i+1, a.status, a.body)
		}
		// The connection ends with the server's FIN, not a reset.
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
			t.Fatalf("attempt %d: after the answer: %q, %v; want the end of the stream", i+1, rest, err)
		}
		c.Close()
	}
}

// A head trickled byte by byte is cut at server.headerTimeout, well before the read
// timeout; a body arriving slowly after its head has the read timeout, counted from the
// request's first byte.
func TestHeaderTimeout(t *testing.T) {
	cfg := Config{HeaderTimeout: 300 * time.Millisecond, ReadTimeout: 1500 * time.Millisecond, WriteTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20}
	addr, _ := limitServer(t, cfg)

	t.Run("head trickled", func(t *testing.T) {
		c := dialFrom(t, "127.0.0.1", addr)
		head := "POST /v1/web3/mainnet HTTP/1.1\r\nHost: a\r\nX-Slow: " + strings.Repeat("s", 1000)
		start := time.Now()
		go func() {
			for i := range len(head) {
				if _, err := c.Write([]byte{head[i]}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		a := readAnswer(t, c, bufio.NewReader(c))
		waited := time.Since(start)
		if e := rpcError(t, a); a.status != http.StatusRequestTimeout || e.Message != "request read timed out" || !a.close {
			t.Fatalf("%d %s, want 408", a.status, a.body)
		}
		if waited < 250*time.Millisecond || waited >= cfg.ReadTimeout {
			t.Fatalf("cut after %v, want the header timeout (300ms, up to two ticks late)", waited)
		}
	})
	t.Run("body slower than the header timeout", func(t *testing.T) {
		c := dialFrom(t, "127.0.0.1", addr)
		raw := post("/v1/echo/x", strings.Repeat("b", 3*streamedBodyOver))
		if _, err := io.WriteString(c, raw[:len(raw)-streamedBodyOver]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cfg.HeaderTimeout + 4*deadlineTick)
		a := roundTrip(t, c, bufio.NewReader(c), raw[len(raw)-streamedBodyOver:])
		if a.status != 200 || a.body != fmt.Sprintf(`{"echo":%d,"error":null}`, 3*streamedBodyOver) {
			t.Fatalf("%d %s, want the body served", a.status, a.body)
		}
	})
	t.Run("body slower than the read timeout", func(t *testing.T) {
		c := dialFrom(t, "127.0.0.1", addr)
		raw := post("/v1/echo/x", strings.Repeat("b", 3*streamedBodyOver))
		start := time.Now()
		a := roundTrip(t, c, bufio.NewReader(c), raw[:len(raw)-streamedBodyOver])
		if e := restError(t, a); a.status != http.StatusRequestTimeout || e.Message != "request read timed out" || !a.close {
			t.Fatalf("%d %s, want 408", a.status, a.body)
		}
		if waited := time.Since(start); waited < cfg.ReadTimeout-50*time.Millisecond {
			t.Fatalf("cut after %v, before the read timeout", waited)
		}
	})
}

// An id over jsonrpc.MaxIDBytes is not echoed, even to a request the route refuses: the
// answer stays small whatever the id's size.
func TestLongIDNotEchoed(t *testing.T) {
	addr, _ := limitServer(t, Config{MaxBodyBytes: 1 << 20})
	for _, method := range []string{"m", "deny"} {
		c := dialFrom(t, "127.0.0.1", addr)
		a := roundTrip(t, c, bufio.NewReader(c), post("/v1/web3/mainnet", `{"jsonrpc":"2.0","id":"`+strings.Repeat("i", 500<<10)+`","method":"`+method+`"}`))
		if e := rpcError(t, a); a.status != http.StatusBadRequest || e.Code != -32600 || !strings.HasPrefix(e.Message, "id too long") || len(a.body) > 200 {
			t.Fatalf("%d, %d bytes: %.200s; want 400 -32600 with id null", a.status, len(a.body), a.body)
		}
	}
}
