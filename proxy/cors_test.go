package proxy

import (
	"net/http"
	"testing"
	"time"
)

// corsRoutes serve a REST echo at /v1/echo/{what} (GET and POST) with cors.
func corsServer(t *testing.T, cors CORSConfig) string {
	t.Helper()
	echo := RESTHandlerFunc(func(r *RESTRequest) (*RESTResponse, error) {
		return &RESTResponse{Member: "echo", Body: []byte(`{}`)}, nil
	})
	return "http://" + serveRoutes(t, Config{CORS: cors},
		&Route{Name: "echo", Method: http.MethodGet, Pattern: "/v1/echo/{what}", REST: echo},
		&Route{Name: "echo_post", Method: http.MethodPost, Pattern: "/v1/echo/{what}", REST: echo})
}

func corsRequest(t *testing.T, method, url, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if method == http.MethodOptions {
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type, authorization, x-api-key")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCORS: browsers' preflights and requests get the CORS answers of the configured
// origins (every origin by default), other origins and non-browser clients none.
func TestCORS(t *testing.T) {
	anyOrigin := CORSConfig{}
	anyOrigin.SetDefaults()
	listed := CORSConfig{AllowedOrigins: []string{"https://app.example"}, MaxAge: time.Minute}
	off := CORSConfig{AllowedOrigins: []string{}}
	for _, tc := range []struct {
		name              string
		cors              CORSConfig
		method, origin    string
		status            int
		allowOrigin, vary string
		preflight         bool
	}{
		{"any: preflight", anyOrigin, http.MethodOptions, "https://dapp.example", http.StatusNoContent, "*", "", true},
		{"any: request", anyOrigin, http.MethodGet, "https://dapp.example", http.StatusOK, "*", "", false},
		{"any: no origin (not a browser)", anyOrigin, http.MethodGet, "", http.StatusOK, "", "", false},
		{"any: OPTIONS without an origin", anyOrigin, http.MethodOptions, "", http.StatusMethodNotAllowed, "", "", false},
		{"listed: preflight", listed, http.MethodOptions, "https://app.example", http.StatusNoContent, "https://app.example", "Origin", true},
		{"listed: request", listed, http.MethodPost, "https://app.example", http.StatusOK, "https://app.example", "Origin", false},
		{"listed: another origin's preflight", listed, http.MethodOptions, "https://evil.example", http.StatusMethodNotAllowed, "", "", false},
		{"listed: another origin's request", listed, http.MethodGet, "https://evil.example", http.StatusOK, "", "", false},
		{"off", off, http.MethodOptions, "https://dapp.example", http.StatusMethodNotAllowed, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := corsRequest(t, tc.method, corsServer(t, tc.cors)+"/v1/echo/x", tc.origin)
			h := resp.Header
			if resp.StatusCode != tc.status || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin || h.Get("Vary") != tc.vary {
				t.Fatalf("HTTP %d, Allow-Origin %q, Vary %q; want %d, %q, %q", resp.StatusCode,
					h.Get("Access-Control-Allow-Origin"), h.Get("Vary"), tc.status, tc.allowOrigin, tc.vary)
			}
			if h.Get("Access-Control-Allow-Credentials") != "" {
				t.Fatal("credentials allowed")
			}
			if got := h.Get("Access-Control-Allow-Methods"); tc.preflight != (got == "GET, POST") {
				t.Fatalf("Allow-Methods %q", got)
			}
			if tc.preflight && (h.Get("Access-Control-Allow-Headers") != "Content-Type, Authorization, X-API-Key, Idempotency-Key, X-Fee-Bump, X-Request-Id" ||
				h.Get("Access-Control-Max-Age") == "") {
				t.Fatalf("preflight headers %v", h)
			}
			if tc.allowOrigin != "" && h.Get("Access-Control-Expose-Headers") == "" {
				t.Fatal("no Expose-Headers")
			}
		})
	}
}

func TestCORSConfig(t *testing.T) {
	for _, bad := range []string{"https://App.example", "https://app.example/", "ftp://x", "app.example", "https://a.example/path"} {
		c := CORSConfig{AllowedOrigins: []string{bad}}
		if len(c.problems()) == 0 {
			t.Errorf("origin %q accepted", bad)
		}
	}
	c := CORSConfig{AllowedOrigins: []string{"*", "http://localhost:3000", "https://app.example"}}
	if p := c.problems(); len(p) != 0 {
		t.Fatal(p)
	}
}
