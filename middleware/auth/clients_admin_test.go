package auth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

type adminReply struct {
	status int
	header http.Header
	body   string
}

func adminDo(t *testing.T, base, method, path, token string) adminReply {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return adminReply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestClientsAdmin: the client admin API on a real HTTP server over a real store: disable
// and enable change the stored state (and what the token endpoint's store reads), every
// request needs a configured admin token, and the answers never carry the secret hash.
func TestClientsAdmin(t *testing.T) {
	db := openStore(t)
	log, logs := observedLogger()
	clock := newTestClock()
	const adminToken = "the-admin-token"
	cfg := ClientsAdminConfig{Tokens: []AdminToken{{Name: "ops", SHA256: hash(adminToken)}}}
	a, err := NewClientsAdmin(cfg, ClientsAdminDeps{Clients: db, Logger: log, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	id, _, err := CreateClient(t.Context(), db, "alice", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	bearer := "Bearer " + adminToken
	item := ClientsAdminPath + "/" + id
	disabledAt := clock.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano) // the second request's time

	for _, tc := range []struct {
		name, method, path string
		want               int
		disabled           bool // the stored state after the request
		body               string
	}{
		{"get", http.MethodGet, item, 200, false, `"disabledAt":null`},
		{"disable", http.MethodPost, item + "/disable", 200, true, `"disabledAt":"` + disabledAt + `"`},
		{"get disabled", http.MethodGet, item, 200, true, `"disabledAt":"` + disabledAt + `"`},
		{"disable again keeps the time", http.MethodPost, item + "/disable", 200, true, `"disabledAt":"` + disabledAt + `"`},
		{"enable", http.MethodPost, item + "/enable", 200, false, `"disabledAt":null`},
		{"enable again", http.MethodPost, item + "/enable", 200, false, `"disabledAt":null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := adminDo(t, srv.URL, tc.method, tc.path, bearer)
			if r.status != tc.want || !strings.Contains(r.body, tc.body) || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s: %d %s", tc.method, tc.path, r.status, r.body)
			}
			var got struct {
				Client struct {
					ID        string   `json:"id"`
					Principal string   `json:"principal"`
					Scopes    []string `json:"scopes"`
				} `json:"client"`
				Error any `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &got); err != nil || got.Client.ID != id || got.Client.Principal != "alice" ||
				len(got.Client.Scopes) != 1 || got.Error != nil || strings.Contains(r.body, "argon2") {
				t.Fatalf("body %s (%v)", r.body, err)
			}
			c, err := db.Client(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if (c.DisabledAt != nil) != tc.disabled {
				t.Fatalf("stored disabledAt %v, want disabled %v", c.DisabledAt, tc.disabled)
			}
		})
		clock.Advance(time.Minute)
	}
	changes := logs.FilterMessage("oauth client disabled").FilterField(zap.String("admin_token", "ops")).Len() +
		logs.FilterMessage("oauth client enabled").FilterField(zap.String("admin_token", "ops")).Len()
	if changes != 4 {
		t.Fatalf("%d changes logged with the admin token's name, want 4:\n%s", changes, logText(logs))
	}

	for _, tc := range []struct {
		name, method, path, auth string
		want                     int
		message, allow           string
	}{
		{"no token", http.MethodPost, item + "/disable", "", 401, "an admin bearer token is required", ""},
		{"wrong token", http.MethodPost, item + "/disable", "Bearer nope", 401, "invalid admin token", ""},
		{"Basic", http.MethodPost, item + "/disable", "Basic " + adminToken, 401, "must be Bearer", ""},
		{"unknown client", http.MethodPost, ClientsAdminPath + "/w3g_nobody/disable", bearer, 404, "no such client", ""},
		{"unknown client, get", http.MethodGet, ClientsAdminPath + "/w3g_nobody", bearer, 404, "no such client", ""},
		{"unknown action", http.MethodPost, item + "/delete", bearer, 404, "no such route", ""},
		{"collection", http.MethodGet, ClientsAdminPath + "/", bearer, 404, "no such route", ""},
		{"too deep", http.MethodPost, item + "/disable/now", bearer, 404, "no such route", ""},
		{"GET disable", http.MethodGet, item + "/disable", bearer, 405, "method GET is not allowed", http.MethodPost},
		{"DELETE client", http.MethodDelete, item, bearer, 405, "method DELETE is not allowed", http.MethodGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := adminDo(t, srv.URL, tc.method, tc.path, tc.auth)
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Request string `json:"request"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != tc.want || e.Error.Code != tc.want ||
				!strings.Contains(e.Error.Message, tc.message) || e.Error.Request == "" || r.header.Get("Allow") != tc.allow {
				t.Fatalf("%d %s (Allow %q), want %d %q", r.status, r.body, r.header.Get("Allow"), tc.want, tc.message)
			}
			if (tc.want == 401) != (r.header.Get("WWW-Authenticate") != "") {
				t.Fatalf("WWW-Authenticate %q with status %d", r.header.Get("WWW-Authenticate"), r.status)
			}
		})
	}
	if c, err := db.Client(t.Context(), id); err != nil || c.DisabledAt != nil {
		t.Fatalf("a refused request changed the client: %v %v", c.DisabledAt, err)
	}
	assertNoSecretsLogged(t, logs, adminToken)
}

func TestClientsAdminOff(t *testing.T) {
	a, err := NewClientsAdmin(ClientsAdminConfig{}, ClientsAdminDeps{Clients: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	r := adminDo(t, srv.URL, http.MethodPost, ClientsAdminPath+"/w3g_x/disable", "Bearer anything")
	if r.status != 403 || !strings.Contains(r.body, "the client admin API is off") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
