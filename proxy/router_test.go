package proxy

import (
	"net/http"
	"strings"
	"testing"
)

func testRouter(t testing.TB) *router {
	rt, err := newRouter([]*Route{
		{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet"},
		{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}"},
		{Name: "token", Method: http.MethodGet, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}/{tokenId}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestRouterMatch(t *testing.T) {
	rt := testRouter(t)
	for _, tc := range []struct {
		method, path, route, params string
	}{
		{"POST", "/v1/web3/mainnet", "mainnet", ""},
		{"POST", "/v1/web3/chains/137", "chains", "chain_id=137"},
		{"POST", "/v1/web3/chains/abc", "chains", "chain_id=abc"},
		{"GET", "/v1/tokens/60/1/0xabc/42", "token", "coinType=60,chainId=1,contractAddress=0xabc,tokenId=42"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r, p, allowed := rt.match(tc.method, tc.path)
			if r == nil || r.Name != tc.route || allowed != nil {
				t.Fatalf("route %v allowed %v", r, allowed)
			}
			var got []string
			for i, n := range p.names {
				got = append(got, n+"="+p.values[i])
			}
			if strings.Join(got, ",") != tc.params {
				t.Fatalf("params %v, want %s", got, tc.params)
			}
		})
	}
}

func TestRouterMisses(t *testing.T) {
	rt := testRouter(t)
	for _, path := range []string{"", "/", "/v1", "/v1/web3", "/v1/web3/mainnet/", "/v1/web3/mainnetx", "/v1/web3/chains", "/v1/web3/chains/", "/v1/web3/chains/1/2", "v1/web3/mainnet", "/v1/tokens/60/1/0xabc"} {
		t.Run(path, func(t *testing.T) {
			if r, _, allowed := rt.match("POST", path); r != nil || allowed != nil {
				t.Fatalf("matched %v, allowed %v", r, allowed)
			}
		})
	}
}

func TestRouterMethodNotAllowed(t *testing.T) {
	r, _, allowed := testRouter(t).match("GET", "/v1/web3/chains/1")
	if r != nil || len(allowed) != 1 || allowed[0] != "POST" {
		t.Fatalf("route %v allowed %v", r, allowed)
	}
}

func FuzzRouterMatch(f *testing.F) {
	for _, s := range []string{"/v1/web3/mainnet", "/v1/web3/chains/1", "//", "/v1/tokens/60/1/a/b", "/v1/web3/chains//"} {
		f.Add(s)
	}
	rt := testRouter(f)
	f.Fuzz(func(t *testing.T, path string) {
		for _, m := range []string{"GET", "POST"} {
			r, p, _ := rt.match(m, path)
			if r == nil {
				continue
			}
			// A match rebuilds to the same path.
			var b strings.Builder
			for _, s := range r.segs {
				b.WriteByte('/')
				if s.param != "" {
					v := p.Get(s.param)
					if v == "" || strings.Contains(v, "/") {
						t.Fatalf("param %s=%q from %q", s.param, v, path)
					}
					b.WriteString(v)
					continue
				}
				b.WriteString(s.lit)
			}
			if b.String() != path {
				t.Fatalf("matched %q as %q", path, b.String())
			}
		}
	})
}
