package products

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
)

const testAdminToken = "admin-token-for-tests"

func adminConfig() Config {
	h := sha256.Sum256([]byte(testAdminToken))
	other := sha256.Sum256([]byte("another-token"))
	return Config{Admin: AdminConfig{MaxBodyBytes: 4096, Tokens: []AdminToken{
		{Name: "other", SHA256: hex.EncodeToString(other[:])},
		{Name: "catalog-ops", SHA256: strings.ToUpper(hex.EncodeToString(h[:]))},
	}}}
}

// adminReq is one request of the admin API table.
type adminReq struct {
	method, path, body string
	header             map[string]string // nil: the admin token and JSON
}

func (e *env) admin1(r adminReq) (int, http.Header, []byte) {
	e.t.Helper()
	h := r.header
	if h == nil {
		h = map[string]string{"Authorization": "Bearer " + testAdminToken, "Content-Type": "application/json"}
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	return e.do(r.method, e.admin+r.path, body, h)
}

// TestAdminAPI walks every answer of the admin API, in order, over one store.
func TestAdminAPI(t *testing.T) {
	e := newEnv(t, adminConfig(), Deps{})
	const id = "0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10"
	item := AdminPath + "/" + id
	changed := string(doc(t, map[string]any{"totalSold": 9}))
	other := string(doc(t, map[string]any{"id": "1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10"}))
	auth := func(v string) map[string]string { return map[string]string{"Authorization": v} }
	for _, c := range []struct {
		name   string
		req    adminReq
		status int
		want   string // in the message of an error, in the body of a success
		header [2]string
	}{
		{"no token", adminReq{"POST", AdminPath, goodProduct, map[string]string{}}, 401, "Not Authorized: an admin bearer token is required", [2]string{"WWW-Authenticate", `Bearer realm="web3gate-admin"`}},
		{"not bearer", adminReq{"POST", AdminPath, goodProduct, auth("Basic " + testAdminToken)}, 401, "Not Authorized: the Authorization header must be Bearer <token>", [2]string{}},
		{"empty bearer", adminReq{"POST", AdminPath, goodProduct, auth("Bearer ")}, 401, "Not Authorized: the Authorization header", [2]string{}},
		{"wrong token", adminReq{"POST", AdminPath, goodProduct, auth("Bearer " + testAdminToken + "x")}, 401, "Not Authorized: invalid admin token", [2]string{}},
		{"wrong token, GET", adminReq{"GET", item, "", auth("Bearer nope")}, 401, "Not Authorized: invalid admin token", [2]string{}},
		{"wrong method on the collection", adminReq{"GET", AdminPath, "", nil}, 405, "method GET is not allowed here", [2]string{"Allow", "POST"}},
		{"wrong method on an item", adminReq{"POST", item, goodProduct, nil}, 405, "method POST is not allowed here", [2]string{"Allow", "GET, PUT, DELETE"}},
		{"unknown route", adminReq{"GET", AdminPath + "/" + id + "/prices", "", nil}, 404, "no such route", [2]string{}},
		{"path id not a UUID", adminReq{"GET", AdminPath + "/42", "", nil}, 400, `id: "42" is not a UUID`, [2]string{}},
		{"GET of none", adminReq{"GET", item, "", nil}, 404, "no product with id " + id, [2]string{}},
		{"DELETE of none", adminReq{"DELETE", item, "", nil}, 404, "no product with id " + id, [2]string{}},
		{"wrong content type", adminReq{"POST", AdminPath, goodProduct, map[string]string{"Authorization": "Bearer " + testAdminToken, "Content-Type": "application/x-www-form-urlencoded"}}, 415, "Content-Type must be application/json", [2]string{}},
		{"malformed content type", adminReq{"POST", AdminPath, goodProduct, map[string]string{"Authorization": "Bearer " + testAdminToken, "Content-Type": "application/"}}, 415, "Content-Type must be application/json", [2]string{}},
		{"body too large", adminReq{"POST", AdminPath, strings.Replace(goodProduct, `"d"`, `"`+strings.Repeat("d", 5000)+`"`, 1), nil}, 413, "the body exceeds 4096 bytes", [2]string{}},
		{"invalid product", adminReq{"POST", AdminPath, string(doc(t, map[string]any{"saleType": "RAFFLE"})), nil}, 400, "invalid product: saleType: must be", [2]string{}},
		{"missing field", adminReq{"POST", AdminPath, string(doc(t, map[string]any{"prices": nil})), nil}, 400, "invalid product: prices: required", [2]string{}},
		{"not JSON", adminReq{"POST", AdminPath, "{", nil}, 400, "invalid product: a product must be a JSON object", [2]string{}},
		{"create", adminReq{"POST", AdminPath, goodProduct, nil}, 201, `"totalSold":3`, [2]string{"Location", item}},
		{"create again", adminReq{"POST", AdminPath, goodProduct, nil}, 409, "a product with id " + id + " exists", [2]string{}},
		{"get", adminReq{"GET", item, "", nil}, 200, `"id":"` + id + `"`, [2]string{}},
		{"get, id in uppercase", adminReq{"GET", AdminPath + "/" + strings.ToUpper(id), "", nil}, 200, `"id":"` + id + `"`, [2]string{}},
		{"put with another id", adminReq{"PUT", item, other, nil}, 400, "id: the body's id 1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10 is not the path's " + id, [2]string{}},
		{"put invalid", adminReq{"PUT", item, string(doc(t, map[string]any{"liveAt": "soon"})), nil}, 400, `invalid product: bad date "soon"`, [2]string{}},
		{"put replaces", adminReq{"PUT", item, changed, nil}, 200, `"totalSold":9`, [2]string{}},
		{"put creates", adminReq{"PUT", AdminPath + "/1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", other, nil}, 201, `"id":"1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10"`, [2]string{"Location", AdminPath + "/1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10"}},
		{"no content type is JSON", adminReq{"PUT", item, changed, auth("Bearer " + testAdminToken)}, 200, `"totalSold":9`, [2]string{}},
		{"delete", adminReq{"DELETE", item, "", nil}, 204, "", [2]string{}},
		{"get after delete", adminReq{"GET", item, "", nil}, 404, "no product with id " + id, [2]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := e.admin1(c.req)
			if status != c.status {
				t.Fatalf("HTTP %d, want %d: %s", status, c.status, body)
			}
			if c.header[0] != "" && h.Get(c.header[0]) != c.header[1] {
				t.Errorf("%s: %q, want %q", c.header[0], h.Get(c.header[0]), c.header[1])
			}
			if h.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			switch {
			case status == http.StatusNoContent:
				if len(body) != 0 {
					t.Errorf("204 with a body: %s", body)
				}
			case status >= 400:
				re := restError(t, body)
				if re.Code != status || re.Status != http.StatusText(status) || re.Request != h.Get("X-Request-Id") || !strings.Contains(re.Message, c.want) {
					t.Errorf("error %+v, want %d with %q", re, status, c.want)
				}
				if strings.Contains(string(body), testAdminToken) {
					t.Errorf("the token is in the answer: %s", body)
				}
			default:
				if h.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(body), `{"product":{`) ||
					!strings.HasSuffix(string(body), `},"error":null}`) || !strings.Contains(string(body), c.want) {
					t.Errorf("answer %s, want a product with %q", body, c.want)
				}
			}
		})
	}
	// The writes are logged with the token's name, never the token.
	var writes []string
	for _, entry := range e.logs.All() {
		writes = append(writes, entry.Message+" by "+entry.ContextMap()["admin_token"].(string))
		for _, f := range entry.Context {
			if strings.Contains(f.String, testAdminToken) {
				t.Errorf("log %q holds the token", entry.Message)
			}
		}
	}
	if got := strings.Join(writes, "; "); got != "product created by catalog-ops; product replaced by catalog-ops; product created by catalog-ops; product deleted by catalog-ops" {
		t.Errorf("logged writes: %s", got)
	}
	// The public list sees the admin's writes.
	if _, _, body := e.get(e.api + "/v1/products"); !strings.Contains(string(body), "1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10") || strings.Contains(string(body), id) {
		t.Errorf("list after the admin writes: %s", body)
	}
}

func TestAdminRequestID(t *testing.T) {
	e := newEnv(t, adminConfig(), Deps{})
	_, h, _ := e.do("GET", e.admin+AdminPath+"/0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", nil,
		map[string]string{"Authorization": "Bearer " + testAdminToken, "X-Request-Id": "trace-42"})
	if got := h.Get("X-Request-Id"); got != "trace-42" {
		t.Errorf("X-Request-Id %q, want the client's", got)
	}
	_, h, _ = e.do("GET", e.admin+AdminPath+"/0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", nil,
		map[string]string{"Authorization": "Bearer " + testAdminToken, "X-Request-Id": "bad id with spaces"})
	if got := h.Get("X-Request-Id"); got == "bad id with spaces" || !strings.HasPrefix(got, "admin-") {
		t.Errorf("X-Request-Id %q, want a generated one", got)
	}
}

// TestAdminOff: without tokens configured, the admin API answers 403 to everyone.
func TestAdminOff(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	for _, r := range []adminReq{
		{"POST", AdminPath, goodProduct, nil},
		{"GET", AdminPath + "/0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", "", map[string]string{}},
		{"DELETE", AdminPath + "/x", "", nil},
	} {
		status, _, body := e.admin1(r)
		if re := restError(t, body); status != http.StatusForbidden || re.Code != 403 || !strings.Contains(re.Message, "the admin product API is off: no products.admin.tokens are configured") {
			t.Errorf("%s %s: HTTP %d %s", r.method, r.path, status, body)
		}
	}
	if rows := e.rows(); rows != "" {
		t.Errorf("rows written: %s", rows)
	}
}

// TestAdminBodyTooLargeChunked: a body over the cap without a Content-Length is cut at the
// cap and refused.
func TestAdminBodyTooLargeChunked(t *testing.T) {
	e := newEnv(t, adminConfig(), Deps{})
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"id":"` + strings.Repeat("x", 10000) + `"}`))
		_ = pw.Close()
	}()
	status, _, body := e.do("POST", e.admin+AdminPath, pr, map[string]string{"Authorization": "Bearer " + testAdminToken})
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(restError(t, body).Message, "exceeds 4096 bytes") {
		t.Errorf("HTTP %d %s", status, body)
	}
}

func TestConfigValidate(t *testing.T) {
	good := adminConfig()
	good.SetDefaults()
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	var defaults Config
	defaults.SetDefaults()
	if defaults.Admin.MaxBodyBytes != DefaultMaxBodyBytes || defaults.Validate() != nil {
		t.Errorf("defaults %+v: %v", defaults, defaults.Validate())
	}
	unnamed := Config{Admin: AdminConfig{Tokens: []AdminToken{{SHA256: good.Admin.Tokens[0].SHA256}}}}
	unnamed.SetDefaults()
	if unnamed.Admin.Tokens[0].Name != "tokens[0]" {
		t.Errorf("default name %q", unnamed.Admin.Tokens[0].Name)
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"bad hash", func(c *Config) { c.Admin.Tokens[0].SHA256 = "abc" }, "admin.tokens[0].sha256: must be 64 hex digits"},
		{"duplicate hash", func(c *Config) { c.Admin.Tokens[1].SHA256 = strings.ToLower(c.Admin.Tokens[0].SHA256) }, "admin.tokens[1].sha256: duplicate of admin.tokens[0]"},
		{"duplicate name", func(c *Config) { c.Admin.Tokens[1].Name = "other" }, "admin.tokens[1].name: duplicate of admin.tokens[0]"},
		{"long name", func(c *Config) { c.Admin.Tokens[1].Name = strings.Repeat("n", 65) }, "admin.tokens[1].name: must be 1 to 64 characters"},
		{"small body cap", func(c *Config) { c.Admin.MaxBodyBytes = 100 }, "admin.maxBodyBytes: must be between 1024 and 67108864"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := adminConfig()
			cfg.Admin.Tokens = append([]AdminToken(nil), cfg.Admin.Tokens...)
			c.edit(&cfg)
			cfg.SetDefaults()
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v, want %q", err, c.want)
			}
		})
	}
}
