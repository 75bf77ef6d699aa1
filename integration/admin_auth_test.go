package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/internal/testproc"
)

// testAdminToken is the admin token of withAdminToken's configs.
const testAdminToken = "integration-admin-token"

// adminAuth is the header that carries testAdminToken.
var adminAuth = []string{"Authorization", "Bearer " + testAdminToken}

// withAdminToken is cfgText (config.yaml or one made from it) with testAdminToken in
// admin.tokens.
func withAdminToken(t testing.TB, cfgText string) string {
	t.Helper()
	out := strings.Replace(cfgText, "  tokens: []\n  #  - name: ops\n", "  tokens: [{name: ops, sha256: "+sha256Hex(testAdminToken)+"}]\n", 1)
	if out == cfgText {
		t.Fatal("config.yaml changed: no admin.tokens to set")
	}
	return out
}

// adminRoutes are a request to each admin API route and the status it answers with a
// good token (the route's own answer: found, not found, bad request).
var adminRoutes = []struct {
	method, path string
	ok           int
}{
	{"GET", "/leases", 200},
	{"GET", "/v1/admin/usage?clientId=web3gate-dev", 200},
	{"GET", "/v1/admin/products/681d6956-da94-5297-aa33-6190582880b1", 404},
	{"POST", "/v1/admin/products", 400},
	{"GET", "/v1/admin/clients/nobody", 404},
	{"POST", "/v1/admin/clients/nobody/disable", 404},
	{"GET", "/v1/admin/webhooks", 200},
	{"DELETE", "/v1/admin/webhooks/00000000-0000-0000-0000-000000000000", 404},
}

// TestAdminAuth: every admin API route refuses a request without a token (401) or with a
// token that is not admin's (401), and accepts a token of admin.tokens, and one of a
// deprecated per-API list (mapped into the one list, with a warning at start); /healthz,
// /readyz and /metrics need none.
func TestAdminAuth(t *testing.T) {
	const oldToken = "old-products-admin-token"
	cfg := withAdminToken(t, devConfig(t))
	cfg = strings.Replace(cfg, "    tokens: []\n    #  - name: catalog-ops", "    tokens: [{sha256: "+sha256Hex(oldToken)+"}]\n    #  - name: catalog-ops", 1)
	cfg = strings.Replace(cfg, "level: warn", "level: info", 1)
	logs := &testproc.Buffer{}
	ts := startServerIn(t, cfg, t.TempDir(), logs)
	for _, r := range adminRoutes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				headers []string
				code    int
				want    string
			}{
				{"no token", nil, 401, "an admin bearer token is required"},
				{"wrong token", []string{"Authorization", "Bearer not-the-admin-token"}, 401, "invalid admin token"},
				{"basic auth", []string{"Authorization", "Basic YWRtaW46YWRtaW4="}, 401, "must be Bearer"},
				{"admin token", adminAuth, r.ok, ""},
				{"deprecated list's token", []string{"Authorization", "Bearer " + oldToken}, r.ok, ""},
			} {
				code, h, body := request(t, r.method, ts.Admin+r.path, []byte("{}"), append(tc.headers, "Content-Type", "application/json")...)
				if code != tc.code || !strings.Contains(string(body), tc.want) {
					t.Errorf("%s: HTTP %d %s, want %d with %q", tc.name, code, body, tc.code, tc.want)
				}
				if code == 401 && h.Get("WWW-Authenticate") != `Bearer realm="web3gate-admin"` {
					t.Errorf("%s: WWW-Authenticate %q", tc.name, h.Get("WWW-Authenticate"))
				}
			}
		})
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body := get(t, ts.Admin+path); code != 200 {
			t.Errorf("%s without a token: HTTP %d %s", path, code, body)
		}
	}
	if !strings.Contains(logs.String(), "products.admin.tokens is deprecated: its tokens are accepted by every admin route") {
		t.Errorf("no deprecation warning in the logs:\n%s", logs.String())
	}
	for _, secret := range []string{testAdminToken, oldToken} {
		if strings.Contains(logs.String(), secret) {
			t.Fatal("a token is in the logs")
		}
	}
}

// TestAdminAuthOff: without any admin token configured, every admin API route answers 403
// and says which key turns it on.
func TestAdminAuthOff(t *testing.T) {
	ts := startServer(t, devConfig(t))
	for _, r := range adminRoutes {
		code, _, body := request(t, r.method, ts.Admin+r.path, nil, adminAuth...)
		if code != http.StatusForbidden || !strings.Contains(string(body), "the admin API is off: no admin.tokens are configured") {
			t.Errorf("%s %s: HTTP %d %s", r.method, r.path, code, body)
		}
	}
}

// TestAdminRequestIDs: every answer of the admin listener carries a request id: the
// caller's X-Request-Id when it is a valid one, else one of the server's, on every admin API
// (and on a refusal before one); paths and methods no route takes get the REST error object
// with the id, not net/http's plain text.
func TestAdminRequestIDs(t *testing.T) {
	ts := startServer(t, withAdminToken(t, devConfig(t)))
	for i, r := range adminRoutes {
		for _, auth := range [][]string{adminAuth, nil} {
			want := fmt.Sprintf("caller-%d:%d", i, len(auth))
			code, h, body := request(t, r.method, ts.Admin+r.path, []byte("{}"), append(auth, "Content-Type", "application/json", "X-Request-Id", want)...)
			if h.Get("X-Request-Id") != want || (code >= 400 && !strings.Contains(string(body), `"request":"`+want+`"`)) {
				t.Errorf("%s %s (token %v): HTTP %d, X-Request-Id %q, body %s; want the caller's %q", r.method, r.path, auth != nil, code, h.Get("X-Request-Id"), body, want)
			}
		}
		_, h, _ := request(t, r.method, ts.Admin+r.path, []byte("{}"), append(adminAuth, "Content-Type", "application/json", "X-Request-Id", "not valid!")...)
		if id := h.Get("X-Request-Id"); id == "" || id == "not valid!" {
			t.Errorf("%s %s: an invalid caller id gave X-Request-Id %q, want the server's", r.method, r.path, id)
		}
	}
	for _, tc := range []struct {
		method, path string
		code         int
		allow, msg   string
	}{
		{"GET", "/no/such/route", 404, "", "no such route"},
		{"GET", "/v1/admin/clients", 404, "", "no such route"},
		{"POST", "/healthz", 405, "GET, HEAD", "method not allowed here (allowed: GET, HEAD)"},
		{"DELETE", "/leases", 405, "GET, HEAD", "method not allowed here (allowed: GET, HEAD)"},
	} {
		code, h, body := request(t, tc.method, ts.Admin+tc.path, nil, "X-Request-Id", "caller-x")
		var e struct {
			Error struct {
				Code             int
				Message, Request string
			}
		}
		if err := json.Unmarshal(body, &e); err != nil || code != tc.code || h.Get("Allow") != tc.allow ||
			e.Error.Code != tc.code || e.Error.Message != tc.msg || e.Error.Request != "caller-x" {
			t.Errorf("%s %s: HTTP %d Allow %q %s, want %d Allow %q %q in the REST error object", tc.method, tc.path, code, h.Get("Allow"), body, tc.code, tc.allow, tc.msg)
		}
	}
}
