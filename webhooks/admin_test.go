package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/internal/netpolicy"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

const adminToken = "test-admin-token"

// strictPolicy is the address policy without exemptions.
var strictPolicy netpolicy.Policy

func adminServer(t *testing.T, db *store.DB, cfg Config) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256([]byte(adminToken))
	cfg.Admin.Tokens = []proxy.AdminToken{{Name: "ops", SHA256: hex.EncodeToString(sum[:])}}
	cfg.Enabled = false // the API only
	s, err := New(cfg, Deps{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(AdminPath, s.AdminHandler())
	mux.Handle(AdminPath+"/", s.AdminHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func adminDo(t *testing.T, method, url, body string, headers ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: HTTP %d, body %q", method, url, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// TestAdminAPI: create (the secret shown once), list (no secrets), the delivery log,
// delete; a config endpoint is not deleted here.
func TestAdminAPI(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	srv := adminServer(t, db, testConfig())
	base := srv.URL + AdminPath

	status, hdr, body := adminDo(t, http.MethodPost, base, `{"principal":"alice","url":"https://hooks.example/w3g?k=1"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, body)
	}
	wh := body["webhook"].(map[string]any)
	id, secret := wh["id"].(string), wh["secret"].(string)
	if !strings.HasPrefix(id, "wh_") || len(secret) != len("whsec_")+64 || !strings.HasPrefix(secret, "whsec_") ||
		wh["principal"] != "alice" || wh["source"] != "admin" || wh["enabled"] != true || hdr.Get("Location") != AdminPath+"/"+id {
		t.Errorf("created %v (Location %q)", wh, hdr.Get("Location"))
	}
	if status, _, body := adminDo(t, http.MethodPost, base, `{"principal":"alice","url":"https://hooks.example/w3g?k=1"}`); status != http.StatusConflict {
		t.Errorf("duplicate: %d %v", status, body)
	}

	status, _, body = adminDo(t, http.MethodGet, base+"?principal=alice", "")
	list := body["webhooks"].([]any)
	if status != 200 || len(list) != 1 {
		t.Fatalf("list: %d %v", status, body)
	}
	if _, has := list[0].(map[string]any)["secret"]; has {
		t.Error("the list shows the secret")
	}
	if _, _, body := adminDo(t, http.MethodGet, base+"?principal=bob", ""); len(body["webhooks"].([]any)) != 0 {
		t.Errorf("bob's list %v", body)
	}

	// An event for alice: one pending delivery in the log.
	advance(t, db, newTx(t, db, "alice", 3), "broadcast")
	status, _, body = adminDo(t, http.MethodGet, base+"/"+id+"/deliveries?limit=10", "")
	log := body["deliveries"].([]any)
	if status != 200 || len(log) != 1 {
		t.Fatalf("deliveries: %d %v", status, body)
	}
	d := log[0].(map[string]any)
	if d["state"] != "pending" || d["type"] != "transaction.broadcast" || d["attempts"] != float64(0) ||
		!strings.HasPrefix(d["eventId"].(string), "evt_") || d["nextAttemptAt"] == nil || d["lastStatus"] != nil {
		t.Errorf("log entry %v", d)
	}

	if status, _, _ := adminDo(t, http.MethodDelete, base+"/"+id, ""); status != http.StatusNoContent {
		t.Errorf("delete: %d", status)
	}
	if status, _, _ := adminDo(t, http.MethodDelete, base+"/"+id, ""); status != http.StatusNotFound {
		t.Errorf("second delete: %d", status)
	}
	if status, _, _ := adminDo(t, http.MethodGet, base+"/"+id+"/deliveries", ""); status != http.StatusNotFound {
		t.Errorf("deliveries of a deleted endpoint: %d", status)
	}

	// A config endpoint: 409 on delete.
	t.Setenv("TEST_WEBHOOK_SECRET", "a-secret-of-16-chars-or-more")
	cfg := testConfig()
	cfg.Endpoints = []EndpointConfig{{Principal: "dev", URL: "https://c.example/", SecretEnv: "TEST_WEBHOOK_SECRET"}}
	s, err := New(cfg, Deps{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, _, body = adminDo(t, http.MethodGet, base+"?principal=dev", "")
	cid := body["webhooks"].([]any)[0].(map[string]any)["id"].(string)
	if status, _, body := adminDo(t, http.MethodDelete, base+"/"+cid, ""); status != http.StatusConflict {
		t.Errorf("delete of a config endpoint: %d %v", status, body)
	}
}

// TestAdminAPIRefuses: each kind of bad request gets its status and a message naming the
// problem; nothing is stored.
func TestAdminAPIRefuses(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	cfg := testConfig()
	cfg.AllowNetworks = nil
	srv := adminServer(t, db, cfg)
	base := srv.URL + AdminPath
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		message                  string
	}{
		{"no token", http.MethodGet, "", "", []string{"Authorization", ""}, 401, "admin bearer token is required"},
		{"wrong token", http.MethodGet, "", "", []string{"Authorization", "Bearer nope"}, 401, "invalid admin token"},
		{"loopback", http.MethodPost, "", `{"principal":"a","url":"http://127.0.0.1:8080/"}`, nil, 400, "url: the destination address is not allowed"},
		{"localhost", http.MethodPost, "", `{"principal":"a","url":"http://localhost/"}`, nil, 400, "url: the destination address is not allowed"},
		{"metadata endpoint", http.MethodPost, "", `{"principal":"a","url":"http://169.254.169.254/"}`, nil, 400, "url: the destination address is not allowed"},
		{"scheme", http.MethodPost, "", `{"principal":"a","url":"ftp://hooks.example/"}`, nil, 400, "url: must be an http:// or https:// URL"},
		{"credentials", http.MethodPost, "", `{"principal":"a","url":"https://u:p@hooks.example/"}`, nil, 400, "url: must not carry credentials"},
		{"no principal", http.MethodPost, "", `{"url":"https://hooks.example/"}`, nil, 400, "principal: must not be empty"},
		{"unknown field", http.MethodPost, "", `{"principal":"a","url":"https://hooks.example/","secret":"x"}`, nil, 400, `unknown field "secret"`},
		{"not JSON", http.MethodPost, "", `{`, nil, 400, "the body must be one JSON object"},
		{"content type", http.MethodPost, "", `{}`, []string{"Content-Type", "text/plain"}, 415, "Content-Type must be application/json"},
		{"too large", http.MethodPost, "", `{"principal":"` + strings.Repeat("a", 70<<10) + `"}`, nil, 413, "the body exceeds"},
		{"method", http.MethodPut, "", ``, nil, 405, "method PUT is not allowed here"},
		{"route", http.MethodGet, "/wh_1/other", ``, nil, 404, "no such route"},
		{"limit", http.MethodGet, "/wh_1/deliveries?limit=0", ``, nil, 400, "limit: must be an integer between 1 and 500"},
		{"unknown webhook", http.MethodGet, "/wh_1/deliveries", ``, nil, 404, "no such webhook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := adminDo(t, tc.method, base+tc.path, tc.body, tc.headers...)
			e, _ := body["error"].(map[string]any)
			if status != tc.status || e == nil || !strings.Contains(e["message"].(string), tc.message) {
				t.Errorf("%d %v, want %d with %q", status, body, tc.status, tc.message)
			}
		})
	}
	var n int
	if err := db.Read(t.Context(), func(tx *store.DBTx) error {
		ws, err := tx.Webhooks(t.Context(), "")
		n = len(ws)
		return err
	}); err != nil || n != 0 {
		t.Errorf("%d endpoints stored (%v)", n, err)
	}
}

// TestAdminAPIOff: without tokens, 403.
func TestAdminAPIOff(t *testing.T) {
	s, err := New(testConfig(), Deps{DB: openStore(t, store.DriverSQLite)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.AdminHandler())
	defer srv.Close()
	status, _, body := adminDo(t, http.MethodGet, srv.URL+AdminPath, "")
	if status != http.StatusForbidden || !strings.Contains(body["error"].(map[string]any)["message"].(string), "webhooks.admin.tokens") {
		t.Errorf("%d %v", status, body)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Setenv("TEST_WEBHOOK_SECRET", "a-secret-of-16-chars-or-more")
	t.Setenv("TEST_SHORT_SECRET", "short")
	ep := func(p, u, env string) []EndpointConfig {
		return []EndpointConfig{{Principal: p, URL: u, SecretEnv: env}}
	}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"timeout", func(c *Config) { c.Timeout = time.Millisecond }, "timeout: must be between 100ms and 5m"},
		{"maxAttempts", func(c *Config) { c.MaxAttempts = 101 }, "maxAttempts: must be between 1 and 100"},
		{"backoff", func(c *Config) { c.Backoff = time.Millisecond }, "backoff: must be between 10ms and 1h"},
		{"maxBackoff", func(c *Config) { c.MaxBackoff = c.Backoff / 2 }, "maxBackoff: must be between backoff and 24h"},
		{"concurrency", func(c *Config) { c.Concurrency = 1000 }, "concurrency: must be between 1 and 256"},
		{"pollInterval", func(c *Config) { c.PollInterval = time.Hour }, "pollInterval: must be between 10ms and 1m"},
		{"retention short", func(c *Config) { r := 30 * time.Second; c.Retention = &r }, "retention: must be 0s (keep forever) or between 1m and 87600h"},
		{"retention negative", func(c *Config) { r := -time.Hour; c.Retention = &r }, "retention: must be 0s (keep forever) or between 1m and 87600h"},
		{"allowNetworks", func(c *Config) { c.AllowNetworks = []string{"nope"} }, `allowNetworks[0]: "nope" is not a CIDR prefix`},
		{"principal", func(c *Config) { c.Endpoints = ep("", "https://h.example/", "TEST_WEBHOOK_SECRET") }, "endpoints[0].principal: must not be empty"},
		{"url", func(c *Config) { c.Endpoints = ep("dev", "hooks.example", "TEST_WEBHOOK_SECRET") }, "endpoints[0].url: must be an http:// or https:// URL"},
		{"loopback", func(c *Config) { c.Endpoints = ep("dev", "http://[::1]:9/", "TEST_WEBHOOK_SECRET") }, "endpoints[0].url: the destination address is not allowed"},
		{"secretEnv name", func(c *Config) { c.Endpoints = ep("dev", "https://h.example/", "not a name") }, "endpoints[0].secretEnv: must name an environment variable"},
		{"secret unset", func(c *Config) { c.Endpoints = ep("dev", "https://h.example/", "TEST_UNSET_SECRET_X") }, "endpoints[0].secretEnv: the environment variable TEST_UNSET_SECRET_X must hold"},
		{"secret short", func(c *Config) { c.Endpoints = ep("dev", "https://h.example/", "TEST_SHORT_SECRET") }, "endpoints[0].secretEnv: the environment variable TEST_SHORT_SECRET must hold"},
		{"duplicate", func(c *Config) {
			c.Endpoints = append(ep("dev", "https://h.example/", "TEST_WEBHOOK_SECRET"), ep("dev", "https://h.example/", "TEST_WEBHOOK_SECRET")...)
		}, "endpoints[1]: the same principal and url as endpoints[0]"},
		{"admin token", func(c *Config) { c.Admin.Tokens = []proxy.AdminToken{{Name: "x", SHA256: "00"}} }, "admin.tokens[0].sha256: must be 64 hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			c.SetDefaults()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want prefix %q", err, tc.want)
			}
			if _, err := New(c, Deps{DB: &store.DB{}}); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
	t.Run("retention 0s keeps forever", func(t *testing.T) {
		var c Config
		if err := yaml.Unmarshal([]byte("retention: 0s"), &c); err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		if err := c.Validate(); err != nil || c.Retention == nil || *c.Retention != 0 {
			t.Fatalf("retention %v: %v", c.Retention, err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		var c Config
		c.SetDefaults()
		c.Endpoints = ep("dev", "https://h.example/", "TEST_WEBHOOK_SECRET")
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.Timeout != 10*time.Second || c.MaxAttempts != 12 || c.Backoff != time.Second || c.MaxBackoff != 10*time.Minute ||
			c.Concurrency != 8 || c.PollInterval != 500*time.Millisecond || c.Retention == nil || *c.Retention != 168*time.Hour {
			t.Errorf("defaults %+v", c)
		}
	})
}

// FuzzCheckURL: whatever the admin API is sent as a url, checkURL does not panic, and what it
// accepts is an http(s) URL with a host, no credentials and no literal address the policy
// refuses.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example/x?y=1", "http://127.0.0.1/", "http://[::1]:80/", "http://localhost./",
		"https://u:p@h/", "ftp://h/", "http://h/#f", "http://%zz/", "http://[fe80::1%25eth0]/", "http://0x7f.1/", "//h/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if checkURL(raw, strictPolicy) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
			t.Fatalf("accepted %q", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && !strictPolicy.Allowed(a) {
			t.Fatalf("accepted %q: a refused address", raw)
		}
	})
}
