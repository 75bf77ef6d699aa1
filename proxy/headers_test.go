package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// routePath must give the route matcher what fasthttp's decoded, normalized path would.
func FuzzRoutePath(f *testing.F) {
	for _, s := range []string{
		"/v1/web3/mainnet", "/v1/web3/chains/1337", "/", "/v1//web3", "/v1/./x", "/v1/../x", "/a/...", "/a/..",
		"/a/.", "/v1/web3%2Fmainnet", "/v1/web3/mainnet?x=1", "/v1/web3/mainnet#f", "/v1/tokens/60/1/0xAb/1/", "http://h/v1/web3/mainnet",
		"/~user/a-b_c.d", "/a/.b/..c", "//", "/a\\b", "/é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(uri)
		got := append([]byte(nil), routePath(&ctx)...)
		var want fasthttp.RequestCtx
		want.Request.SetRequestURI(uri)
		if !bytes.Equal(got, want.Path()) {
			t.Fatalf("routePath(%q) = %q, fasthttp's path %q", uri, got, want.Path())
		}
	})
}

func TestRoutePathTakesPlainPathsAsSent(t *testing.T) {
	for _, p := range []string{"/v1/web3/mainnet", "/v1/web3/chains/1337", "/", "/v1/tokens/60/1/0xAb/1/", "/a/..."} {
		if !plainPath([]byte(p)) {
			t.Errorf("%q is not taken as plain", p)
		}
	}
	for _, p := range []string{"", "v1", "//", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/a%2Fb", "/a?b", "/a#b", "/a b", "/é"} {
		if plainPath([]byte(p)) {
			t.Errorf("%q is taken as plain", p)
		}
	}
}

func readRequest(t *testing.T, raw string) *fasthttp.RequestHeader {
	t.Helper()
	var h fasthttp.RequestHeader
	if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	return &h
}

func TestReadHeadersOnePass(t *testing.T) {
	h := readRequest(t, "POST /v1/web3/mainnet HTTP/1.1\r\nHost: x\r\nx-api-key: first\r\nX-API-KEY: second\r\n"+
		"authorization: Bearer  tok-1 \r\nX-Request-Id: abc-1\r\nIdempotency-Key: k\r\nX-Other: y\r\n\r\n")
	var r reqHeaders
	r.read(h)
	if string(r.clientID) != "first" || string(r.authorization) != "Bearer  tok-1" || string(r.requestID) != "abc-1" || string(r.idempotencyKey) != "k" {
		t.Fatalf("read %q %q %q %q", r.clientID, r.authorization, r.requestID, r.idempotencyKey)
	}
	// The values agree with fasthttp's Peek, which the one pass replaces.
	for _, k := range []string{"X-API-Key", "Authorization", "X-Request-Id", "Idempotency-Key"} {
		var got []byte
		switch k {
		case "X-API-Key":
			got = r.clientID
		case "Authorization":
			got = r.authorization
		case "X-Request-Id":
			got = r.requestID
		default:
			got = r.idempotencyKey
		}
		if !bytes.Equal(got, h.Peek(k)) {
			t.Errorf("%s: %q, Peek %q", k, got, h.Peek(k))
		}
	}

	ex, body := newExchange([]byte(`{"a":1}`), false, []byte("abc-1"), &r, time.Unix(1, 0))
	if string(body) != `{"a":1}` || cap(body) != len(body) || ex.RequestID != "abc-1" || ex.ClientID != "first" ||
		ex.Bearer != "tok-1" || ex.BadAuthHeader || ex.IdempotencyKey != "k" || !ex.HasIdempotencyKey {
		t.Fatalf("exchange %+v, body %q", ex, body)
	}
	h.Reset() // the exchange keeps copies, not fasthttp's buffers
	if ex.ClientID != "first" || ex.Bearer != "tok-1" {
		t.Fatalf("exchange changed with the header: %+v", ex)
	}
}

func TestReadHeadersBadOrMissingCredentials(t *testing.T) {
	for _, tc := range []struct {
		auth         string
		bearer       string
		bad, hasIdem bool
	}{
		{"", "", false, false},
		{"Authorization: Basic dXNlcg==\r\n", "", true, false},
		{"Authorization: Bearer \r\n", "", true, false},
		{"Authorization: bearer t\r\nIdempotency-Key: \r\n", "t", false, false},
	} {
		h := readRequest(t, "POST / HTTP/1.1\r\nHost: x\r\n"+tc.auth+"\r\n")
		var r reqHeaders
		r.read(h)
		ex, _ := newExchange(nil, false, nil, &r, time.Time{})
		if ex.Bearer != tc.bearer || ex.BadAuthHeader != tc.bad || ex.HasIdempotencyKey != tc.hasIdem || ex.ClientID != "" || ex.RequestID != "" {
			t.Errorf("%q: exchange %+v", tc.auth, ex)
		}
	}
}

// A small request's copies live in the exchange itself; a large one's in an array of
// their size. Either way they survive fasthttp's reuse of its buffers.
func TestNewExchangeInlineAndLarge(t *testing.T) {
	for _, n := range []int{0, 100, 167, 168, 4096} {
		h := readRequest(t, "POST / HTTP/1.1\r\nHost: x\r\nX-Api-Key: cid\r\nAuthorization: Bearer tok\r\n\r\n")
		var r reqHeaders
		r.read(h)
		body := bytes.Repeat([]byte("b"), n)
		ex, own := newExchange(body, false, []byte("rid"), &r, time.Time{})
		total := n + len("rid") + len("cid") + len("tok")
		inline := total <= len(ex.inline)
		if got := len(own) > 0 && &own[0] == &ex.inline[0]; got != (inline && n > 0) {
			t.Errorf("body %d: inline %v, want %v", n, got, inline)
		}
		clear(body)
		h.Reset()
		if len(own) != n || bytes.Count(own, []byte("b")) != n || cap(own) != n || ex.RequestID != "rid" || ex.ClientID != "cid" || ex.Bearer != "tok" {
			t.Errorf("body %d: exchange %q %q %q, body of %d bytes", n, ex.RequestID, ex.ClientID, ex.Bearer, len(own))
		}
	}
}

// The client id of a URL, for wallets that take only a URL: the route's {client_id} segment
// or the apiKey query parameter, each as good as the X-API-Key header, and two that differ
// flagged for the auth stage to refuse.
func TestClientIDFromURL(t *testing.T) {
	echo := HandlerFunc(func(c *Call) (*Response, error) {
		return &Response{Result: fmt.Appendf(nil, `{"id":%q,"conflict":%t}`, c.Exchange.ClientID, c.Exchange.ClientIDConflict)}, nil
	})
	base := "http://" + serveRoutes(t, Config{},
		&Route{Name: "rpc", Method: http.MethodPost, Pattern: "/v1/rpc", ChainID: 1, Handler: echo},
		&Route{Name: "rpc", Method: http.MethodPost, Pattern: "/v1/rpc/{" + ClientIDParam + "}", ChainID: 1, Handler: echo})
	for _, tc := range []struct {
		name, path, header string // header: the X-API-Key value, "" for none
		id                 string
		conflict           bool
	}{
		{"header", "/v1/rpc", "app", "app", false},
		{"none", "/v1/rpc", "", "", false},
		{"path", "/v1/rpc/app", "", "app", false},
		{"path, escaped", "/v1/rpc/a%2Bb%20c", "", "a+b c", false},
		{"query", "/v1/rpc?apiKey=app", "", "app", false},
		{"query, escaped", "/v1/rpc?x=1&apiKey=a%2Bb+c", "", "a+b c", false},
		{"query, empty", "/v1/rpc?apiKey=", "", "", false},
		{"query, empty, header", "/v1/rpc?apiKey=", "app", "app", false},
		{"query, other name", "/v1/rpc?apikey=app&key=app", "", "", false},
		{"path and query, same", "/v1/rpc/app?apiKey=app", "", "app", false},
		{"path and query, different", "/v1/rpc/app?apiKey=other", "", "app", true},
		{"header and path, same", "/v1/rpc/app", "app", "app", false},
		{"header and path, different", "/v1/rpc/other", "app", "app", true},
		{"header and query, different", "/v1/rpc?apiKey=other", "app", "app", true},
		{"header and path differ only in case", "/v1/rpc/App", "app", "app", true},
		{"query key repeated, same", "/v1/rpc?apiKey=app&apiKey=app", "", "app", false},
		{"query key repeated, different", "/v1/rpc?apiKey=app&apiKey=other", "", "app", true},
		{"query key repeated, empty first", "/v1/rpc?apiKey=&apiKey=app", "", "app", false},
		{"query key repeated, one differs from the path", "/v1/rpc/app?apiKey=app&apiKey=other", "", "app", true},
		{"query key repeated, one differs from the header", "/v1/rpc?apiKey=app&x=1&apiKey=other", "app", "app", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`))
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set("X-API-Key", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"id":%q,"conflict":%t}}`, tc.id, tc.conflict)
			if resp.StatusCode != http.StatusOK || string(got) != want {
				t.Fatalf("%d %s, want %s", resp.StatusCode, got, want)
			}
		})
	}
}

// A repeated X-API-Key header is one client id when its values agree, and a conflict when
// they differ; an empty one is no client id, as an empty apiKey is.
func TestClientIDRepeatedHeader(t *testing.T) {
	echo := HandlerFunc(func(c *Call) (*Response, error) {
		return &Response{Result: fmt.Appendf(nil, `{"id":%q,"conflict":%t}`, c.Exchange.ClientID, c.Exchange.ClientIDConflict)}, nil
	})
	base := "http://" + serveRoutes(t, Config{},
		&Route{Name: "rpc", Method: http.MethodPost, Pattern: "/v1/rpc", ChainID: 1, Handler: echo},
		&Route{Name: "rpc", Method: http.MethodPost, Pattern: "/v1/rpc/{" + ClientIDParam + "}", ChainID: 1, Handler: echo})
	for _, tc := range []struct {
		name, path string
		keys       []string // the X-API-Key headers, in order
		id         string
		conflict   bool
	}{
		{"twice, same", "/v1/rpc", []string{"app", "app"}, "app", false},
		{"twice, different", "/v1/rpc", []string{"app", "other"}, "app", true},
		{"three times, the last different", "/v1/rpc", []string{"app", "app", "other"}, "app", true},
		{"empty, then one", "/v1/rpc", []string{"", "app"}, "app", false},
		{"twice, same, and the path", "/v1/rpc/app", []string{"app", "app"}, "app", false},
		{"twice, the second as the path", "/v1/rpc/other", []string{"app", "other"}, "app", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header["X-Api-Key"] = tc.keys
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"id":%q,"conflict":%t}}`, tc.id, tc.conflict)
			if resp.StatusCode != http.StatusOK || string(got) != want {
				t.Fatalf("%d %s, want %s", resp.StatusCode, got, want)
			}
		})
	}
}

// The exchange fills a size class of the allocator (see Exchange.inline and
// docs/performance.md, "Notes from the code", proxy).
func TestExchangeSize(t *testing.T) {
	if n := unsafe.Sizeof(Exchange{}); n != 696 {
		t.Fatalf("Exchange is %d bytes: resize inline so that it is 696", n)
	}
}
