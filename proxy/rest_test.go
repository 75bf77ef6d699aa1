package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// restServer serves REST routes whose handler echoes what it saw, or fails as asked.
func restServer(t *testing.T) string {
	t.Helper()
	echo := RESTHandlerFunc(func(r *RESTRequest) (*RESTResponse, error) {
		switch r.Params.Get("what") {
		case "bad":
			return nil, Errorf(http.StatusBadRequest, "tokenId %q is not a number", "x")
		case "timeout":
			return nil, jsonrpc.ErrUpstreamTimeout
		case "upstream":
			return nil, jsonrpc.ErrUpstreamUnavailable.With("all upstream attempts failed")
		case "reverted":
			return nil, jsonrpc.FromUpstream(3, "execution reverted", nil)
		case "boom":
			return nil, errors.New("database is on fire at /var/lib/secret")
		case "raw":
			return &RESTResponse{Body: []byte(`{"access_token":"t","token_type":"Bearer"}`), Header: map[string]string{"Cache-Control": "no-store"}}, nil
		}
		list := `"` + strings.Join(r.QueryList("a"), "|") + `"`
		single, ok := r.Query("b")
		if !ok {
			single = "<none>"
		}
		return &RESTResponse{Member: "echo", Body: []byte(`{"what":"` + r.Params.Get("what") + `","a":` + list + `,"b":"` + single + `"}`)}, nil
	})
	return "http://" + serveRoutes(t, Config{},
		&Route{Name: "echo", Method: http.MethodGet, Pattern: "/v1/echo/{what}", REST: echo},
		&Route{Name: "echo_post", Method: http.MethodPost, Pattern: "/v1/echo/{what}", REST: echo})
}

// serveRoutes serves routes with cfg (the limits it leaves unset small: 4 KiB bodies,
// batches of 10) on a free loopback port until the test ends, and returns its address.
func serveRoutes(t *testing.T, cfg Config, routes ...*Route) string {
	t.Helper()
	addr, _ := serveServer(t, cfg, routes...)
	return addr
}

// serveServer is serveRoutes that returns the server too.
func serveServer(t *testing.T, cfg Config, routes ...*Route) (string, *Server) {
	t.Helper()
	defaults.Set(&cfg.MaxBodyBytes, 4096)
	defaults.Set(&cfg.MaxBatch, 10)
	defaults.Set(&cfg.BatchConcurrency, 1)
	s, err := New(cfg, Deps{
		Logger:     zap.NewNop(),
		Registry:   prometheus.NewRegistry(),
		Routes:     routes,
		KnownChain: func(uint64) bool { return false },
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = s.Serve(ln); close(served) }()
	t.Cleanup(func() { _ = s.srv.Shutdown(); <-served })
	return ln.Addr().String(), s
}

func TestREST(t *testing.T) {
	base := restServer(t)
	for _, tc := range []struct {
		method, path string
		status       int
		body         string // with REQ for the request id
	}{
		{"GET", "/v1/echo/x?a=1&a=2&b=z", 200, `{"echo":{"what":"x","a":"1|2","b":"z"},"error":null}`},
		{"GET", "/v1/echo/x?a=1,2,,3", 200, `{"echo":{"what":"x","a":"1|2|3","b":"<none>"},"error":null}`},
		{"GET", "/v1/echo/x?a[]=1&a[]=2&a=3", 200, `{"echo":{"what":"x","a":"3|1|2","b":"<none>"},"error":null}`},
		{"GET", "/v1/echo/x?a%5B%5D=1", 200, `{"echo":{"what":"x","a":"1","b":"<none>"},"error":null}`},
		{"POST", "/v1/echo/raw", 200, `{"access_token":"t","token_type":"Bearer"}`},
		{"GET", "/v1/echo/bad", 400, `{"error":{"code":400,"status":"Bad Request","request":"REQ","message":"tokenId \"x\" is not a number"}}`},
		{"GET", "/v1/echo/timeout", 504, `{"error":{"code":504,"status":"Gateway Timeout","request":"REQ","message":"upstream timeout"}}`},
		{"GET", "/v1/echo/upstream", 502, `{"error":{"code":502,"status":"Bad Gateway","request":"REQ","message":"upstream failure"}}`},
		{"GET", "/v1/echo/reverted", 502, `{"error":{"code":502,"status":"Bad Gateway","request":"REQ","message":"upstream failure"}}`},
		{"GET", "/v1/echo/boom", 500, `{"error":{"code":500,"status":"Internal Server Error","request":"REQ","message":"internal error"}}`},
		{"DELETE", "/v1/echo/x", 405, `{"error":{"code":405,"status":"Method Not Allowed","request":"REQ","message":"method DELETE is not allowed here"}}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+tc.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			want := strings.ReplaceAll(tc.body, "REQ", resp.Header.Get("X-Request-Id"))
			if resp.StatusCode != tc.status || string(b) != want {
				t.Fatalf("%d %s\nwant %d %s", resp.StatusCode, b, tc.status, want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q", ct)
			}
		})
	}
}
