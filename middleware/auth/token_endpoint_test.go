package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// tokenFixture is a real server with the token and JWKS endpoints and a JSON-RPC route behind
// the auth stage with the full verifier chain, over a real SQLite store.
type tokenFixture struct {
	base   string
	client *http.Client
	db     *store.DB
	oauth  *OAuth
	chain  *Chain
	logs   *observer.ObservedLogs

	id, secret string // alice's client, scope eth_sign
}

const staticToken = "static-token-of-bob"

// principalEcho answers a JSON-RPC call with the principal the auth stage set.
type principalEcho struct{}

func (principalEcho) Serve(c *proxy.Call) (*proxy.Response, error) {
	b, err := json.Marshal(c.Principal.ID)
	return &proxy.Response{Result: b}, err
}

func newTokenFixture(t *testing.T) *tokenFixture {
	t.Helper()
	return newTokenFixtureWith(t, nil, nil)
}

// newTokenFixtureWith is newTokenFixture with a config edited by edit and a clock (nil:
// time.Now).
func newTokenFixtureWith(t *testing.T, edit func(*OAuthConfig), now func() time.Time) *tokenFixture {
	t.Helper()
	log, logs := observedLogger()
	db := openStore(t)
	cfg := testOAuthConfig()
	cfg.SigningKeyFile = filepath.Join(t.TempDir(), "jwt-signing-key.pem")
	if edit != nil {
		edit(&cfg)
	}
	oa, err := NewOAuth(t.Context(), cfg, OAuthDeps{Clients: db, Logger: log, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	static, err := NewStaticTokens([]TokenConfig{{SHA256: hash(staticToken), Principal: "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	chain := oa.Chain(static)
	stage, err := New(Config{Clients: []ClientConfig{{ID: "app"}}}, Deps{Verifier: chain})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, log,
		&proxy.Route{Name: "oauth2_token", Method: http.MethodPost, Pattern: "/v1/oauth2/token", REST: oa.TokenHandler()},
		&proxy.Route{Name: "oauth2_jwks", Method: http.MethodGet, Pattern: "/v1/oauth2/jwks", REST: oa.JWKSHandler()},
		&proxy.Route{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet", ChainID: 1, Handler: proxy.Compile(principalEcho{}, stage)},
	)
	id, secret, err := CreateClient(context.Background(), db, "alice", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	return &tokenFixture{base: base, client: testClient(t), db: db, oauth: oa, chain: chain, logs: logs, id: id, secret: secret}
}

// addClient stores a client with a chosen secret, scopes and state.
func (f *tokenFixture) addClient(t *testing.T, id, secret, principal string, scopes []string, disabled bool) {
	t.Helper()
	h, err := HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	c := store.Client{ID: id, SecretHash: h, Principal: principal, Scopes: scopes}
	if disabled {
		now := time.Now()
		c.DisabledAt = &now
	}
	if err := f.db.AddClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (f *tokenFixture) post(t testing.TB, contentType, body string, header map[string]string) reply {
	t.Helper()
	r, err := f.do(contentType, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// do is post for a goroutine other than the test's: it returns the error.
func (f *tokenFixture) do(contentType, body string, header map[string]string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, f.base+"/v1/oauth2/token", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

const formType = "application/x-www-form-urlencoded"

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

// rpc sends eth_chainId with a bearer token and returns the status and body.
func (f *tokenFixture) rpc(t *testing.T, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.base+"/v1/web3/mainnet", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "app")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

type tokenBody struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

func TestTokenEndpointIssues(t *testing.T) {
	f := newTokenFixture(t)
	const oddSecret = "a:b+c%d e/f"
	f.addClient(t, "w3g_odd", oddSecret, "dave", []string{ScopeSign}, false)
	var tokens []string
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		header      map[string]string
		principal   string
	}{
		{"basic", formType, form("grant_type", "client_credentials"), map[string]string{"Authorization": basic(f.id, f.secret)}, "alice"},
		{"basic with scope", formType, form("grant_type", "client_credentials", "scope", ScopeSign), map[string]string{"Authorization": basic(f.id, f.secret)}, "alice"},
		{"basic with the same client_id in the body", formType, form("grant_type", "client_credentials", "client_id", f.id), map[string]string{"Authorization": basic(f.id, f.secret)}, "alice"},
		{"basic, scheme in lower case", formType, form("grant_type", "client_credentials"), map[string]string{"Authorization": "basic" + strings.TrimPrefix(basic(f.id, f.secret), "Basic")}, "alice"},
		{"basic, url-encoded secret", formType, form("grant_type", "client_credentials"), map[string]string{"Authorization": basic("w3g_odd", oddSecret)}, "dave"},
		{"form", formType, form("grant_type", "client_credentials", "client_id", f.id, "client_secret", f.secret), nil, "alice"},
		{"form with scope and charset", formType + "; charset=UTF-8", form("grant_type", "client_credentials", "client_id", f.id, "client_secret", f.secret, "scope", " eth_sign  eth_sign"), nil, "alice"},
		{"form, url-encoded secret", formType, form("grant_type", "client_credentials", "client_id", "w3g_odd", "client_secret", oddSecret), nil, "dave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, tc.contentType, tc.body, tc.header)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			for k, want := range map[string]string{"Cache-Control": "no-store", "Pragma": "no-cache", "Content-Type": "application/json"} {
				if got := r.header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			var tb tokenBody
			dec := json.NewDecoder(strings.NewReader(string(r.body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&tb); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			if tb.TokenType != "Bearer" || tb.ExpiresIn != 3600 || tb.Scope != ScopeSign || tb.AccessToken == "" {
				t.Fatalf("body = %s", r.body)
			}
			tokens = append(tokens, tb.AccessToken)
			id, err := f.chain.VerifyScoped(tb.AccessToken)
			if err != nil {
				t.Fatalf("the issued token does not verify: %v", err)
			}
			if id.Principal != tc.principal || !slices.Equal(id.Scopes, []string{ScopeSign}) {
				t.Fatalf("identity = %+v, want %s with eth_sign", id, tc.principal)
			}
			// It works as the bearer of a JSON-RPC request, through the auth stage.
			status, body := f.rpc(t, tb.AccessToken)
			if want := `{"jsonrpc":"2.0","id":1,"result":"` + tc.principal + `"}`; status != http.StatusOK || body != want {
				t.Fatalf("JSON-RPC with the token: %d %s, want 200 %s", status, body, want)
			}
		})
	}
	if issued := f.logs.FilterMessage("access token issued").Len(); issued != 8 {
		t.Fatalf("%d issuance log lines, want 8", issued)
	}
	// The chain keeps the static tokens and refuses what nobody issued.
	if status, body := f.rpc(t, staticToken); status != http.StatusOK || !strings.Contains(body, `"result":"bob"`) {
		t.Fatalf("static token: %d %s", status, body)
	}
	if status, body := f.rpc(t, "eyJhbGciOiJub25lIn0.e30."); status != http.StatusUnauthorized || !strings.Contains(body, "Not Authorized") {
		t.Fatalf("forged token: %d %s", status, body)
	}
	// Neither the secrets nor the tokens, whole or their signatures, are in the logs.
	secrets := []string{f.secret, oddSecret, url.QueryEscape(oddSecret), strings.TrimPrefix(basic(f.id, f.secret), "Basic ")}
	for _, tok := range tokens {
		secrets = append(secrets, tok, tok[strings.LastIndex(tok, ".")+1:])
	}
	assertNoSecretsLogged(t, f.logs, secrets...)
}

func TestTokenEndpointRefuses(t *testing.T) {
	f := newTokenFixture(t)
	f.addClient(t, "w3g_disabled", "disabled-secret", "carol", []string{ScopeSign}, true)
	f.addClient(t, "w3g_reader", "reader-secret", "erin", []string{"read"}, false)
	f.addClient(t, "w3g_noscope", "noscope-secret", "frank", nil, false)
	gt := func(kv ...string) string { return form(append([]string{"grant_type", "client_credentials"}, kv...)...) }
	auth := map[string]string{"Authorization": basic(f.id, f.secret)}
	b64 := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		header      map[string]string
		status      int
		code        string
	}{
		{"missing grant_type", formType, form("scope", ScopeSign), auth, 400, "invalid_request"},
		{"empty grant_type", formType, form("grant_type", ""), auth, 400, "invalid_request"},
		{"wrong grant_type", formType, form("grant_type", "password", "username", "alice", "password", "x"), auth, 400, "unsupported_grant_type"},
		{"authorization_code grant", formType, form("grant_type", "authorization_code", "code", "x"), auth, 400, "unsupported_grant_type"},
		{"JSON body", "application/json", `{"grant_type":"client_credentials"}`, auth, 400, "invalid_request"},
		{"no content type", "", gt(), auth, 400, "invalid_request"},
		{"multipart", "multipart/form-data; boundary=x", gt(), auth, 400, "invalid_request"},
		{"malformed form", formType, "grant_type=client_credentials&scope=%zz", auth, 400, "invalid_request"},
		{"repeated parameter", formType, gt("scope", ScopeSign, "scope", ScopeSign), auth, 400, "invalid_request"},
		{"repeated parameter with quotes in its name", formType, gt("a\"\\é", "1", "a\"\\é", "2"), auth, 400, "invalid_request"},
		{"two authentication methods", formType, gt("client_id", f.id, "client_secret", f.secret), auth, 400, "invalid_request"},
		{"client_id differs from Basic", formType, gt("client_id", "w3g_other"), auth, 400, "invalid_request"},
		{"no credentials", formType, gt(), nil, 401, "invalid_client"},
		{"client_id without secret", formType, gt("client_id", f.id), nil, 401, "invalid_client"},
		{"empty secret", formType, gt("client_id", f.id, "client_secret", ""), nil, 401, "invalid_client"},
		{"Basic not base64", formType, gt(), map[string]string{"Authorization": "Basic !!!not-base64!!!"}, 401, "invalid_client"},
		{"Basic without colon", formType, gt(), map[string]string{"Authorization": b64(f.id + f.secret)}, 401, "invalid_client"},
		{"Basic bad percent-encoding", formType, gt(), map[string]string{"Authorization": b64(f.id + ":%zz")}, 401, "invalid_client"},
		{"Basic empty secret", formType, gt(), map[string]string{"Authorization": b64(f.id + ":")}, 401, "invalid_client"},
		{"Basic without credentials", formType, gt(), map[string]string{"Authorization": "Basic"}, 401, "invalid_client"},
		{"Bearer scheme", formType, gt(), map[string]string{"Authorization": "Bearer " + staticToken}, 401, "invalid_client"},
		{"unknown client, Basic", formType, gt(), map[string]string{"Authorization": basic("w3g_nobody", f.secret)}, 401, "invalid_client"},
		{"unknown client, form", formType, gt("client_id", "w3g_nobody", "client_secret", f.secret), nil, 401, "invalid_client"},
		{"wrong secret, Basic", formType, gt(), map[string]string{"Authorization": basic(f.id, f.secret+"x")}, 401, "invalid_client"},
		{"wrong secret, form", formType, gt("client_id", f.id, "client_secret", strings.ToUpper(f.secret)), nil, 401, "invalid_client"},
		{"another client's secret", formType, gt(), map[string]string{"Authorization": basic(f.id, "reader-secret")}, 401, "invalid_client"},
		{"disabled client", formType, gt(), map[string]string{"Authorization": basic("w3g_disabled", "disabled-secret")}, 401, "invalid_client"},
		{"scope not allowed", formType, gt("scope", "admin"), auth, 400, "invalid_scope"},
		{"one scope of two not allowed", formType, gt("scope", ScopeSign+" admin"), auth, 400, "invalid_scope"},
		{"eth_sign not granted", formType, gt("scope", ScopeSign), map[string]string{"Authorization": basic("w3g_reader", "reader-secret")}, 400, "invalid_scope"},
		{"malformed scope", formType, gt("scope", `eth_"sign\`), auth, 400, "invalid_scope"},
		{"client without scopes", formType, gt(), map[string]string{"Authorization": basic("w3g_noscope", "noscope-secret")}, 400, "invalid_scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, tc.contentType, tc.body, tc.header)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			var e map[string]string
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			if len(e) != 2 || e["error"] != tc.code || e["error_description"] == "" {
				t.Fatalf("body = %s, want exactly error %q and an error_description", r.body, tc.code)
			}
			if strings.ContainsFunc(e["error_description"], func(c rune) bool { return c < 0x20 || c > 0x7e || c == '"' || c == '\\' }) {
				t.Fatalf("error_description %q has characters RFC 6749 §5.2 forbids", e["error_description"])
			}
			wantAuth := ""
			if tc.status == http.StatusUnauthorized {
				wantAuth = `Basic realm="web3gate"`
			}
			if got := r.header.Get("WWW-Authenticate"); got != wantAuth {
				t.Fatalf("WWW-Authenticate = %q, want %q", got, wantAuth)
			}
			if r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control = %q", r.header.Get("Cache-Control"))
			}
			if strings.Contains(string(r.body), "access_token") {
				t.Fatal("a refusal carries a token")
			}
		})
	}
	if issued := f.logs.FilterMessage("access token issued").Len(); issued != 0 {
		t.Fatalf("%d tokens issued by refused requests", issued)
	}
	refused := f.logs.FilterMessage("token request refused")
	if refused.Len() == 0 {
		t.Fatal("refusals are not logged at debug")
	}
	// A stored client is named; an unknown id is not (it may be a misplaced secret).
	if refused.FilterField(zap.String("client_id", "w3g_disabled")).Len() != 1 {
		t.Fatalf("the disabled client's refusal does not name it:\n%s", logText(f.logs))
	}
	assertNoSecretsLogged(t, f.logs, f.secret, strings.ToUpper(f.secret), "disabled-secret", "reader-secret", "noscope-secret", "w3g_nobody", staticToken)
}

// TestTokenEndpointStoreFailure: a store that fails is a 500 with its cause logged by the
// server, not an OAuth refusal that would hide it.
func TestTokenEndpointStoreFailure(t *testing.T) {
	log, logs := observedLogger()
	db := openStore(t)
	iss, err := NewIssuer(testOAuthConfig(), testSigningKey(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := NewTokenEndpoint(testOAuthConfig(), TokenEndpointDeps{Clients: db, Issuer: iss, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, log, &proxy.Route{Name: "oauth2_token", Method: http.MethodPost, Pattern: "/v1/oauth2/token", REST: ep})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f := &tokenFixture{base: base, client: testClient(t)}
	r := f.post(t, formType, form("grant_type", "client_credentials", "client_id", "w3g_x", "client_secret", "the-secret"), nil)
	if r.status != http.StatusInternalServerError || !strings.Contains(string(r.body), `"internal error"`) {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if logs.FilterMessage("internal error").Len() != 1 {
		t.Fatalf("the cause is not logged:\n%s", logText(logs))
	}
	assertNoSecretsLogged(t, logs, "the-secret")
}

// TestJWKSEndpoint: a service holding only the JWKS URL verifies web3gate's tokens with a
// stock JWKS client.
func TestJWKSEndpoint(t *testing.T) {
	f := newTokenFixture(t)
	req, err := http.NewRequest(http.MethodGet, f.base+"/v1/oauth2/jwks", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || string(body) != string(f.oauth.key.JWKS()) || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET jwks: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	r := f.post(t, formType, form("grant_type", "client_credentials"), map[string]string{"Authorization": basic(f.id, f.secret)})
	var tb tokenBody
	if err := json.Unmarshal(r.body, &tb); err != nil {
		t.Fatal(err)
	}
	kf, err := keyfunc.NewDefaultCtx(t.Context(), []string{f.base + "/v1/oauth2/jwks"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Parse(tb.AccessToken, kf.Keyfunc, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithAudience("web3gate"), jwt.WithIssuer("web3gate"))
	if err != nil || !tok.Valid {
		t.Fatalf("a JWKS client cannot verify the token: %v", err)
	}
	if sub, _ := tok.Claims.GetSubject(); sub != "alice" {
		t.Fatalf("sub = %q", sub)
	}
}

// BenchmarkTokenEndpoint: an unknown client id, a wrong secret and a good request each cost
// one argon2id verification; compare their ns/op.
func BenchmarkTokenEndpoint(b *testing.B) {
	db := openStore(b)
	key := testSigningKey(b)
	iss, err := NewIssuer(testOAuthConfig(), key, nil)
	if err != nil {
		b.Fatal(err)
	}
	ep, err := NewTokenEndpoint(testOAuthConfig(), TokenEndpointDeps{Clients: db, Issuer: iss})
	if err != nil {
		b.Fatal(err)
	}
	id, secret, err := CreateClient(context.Background(), db, "alice", []string{ScopeSign})
	if err != nil {
		b.Fatal(err)
	}
	base := startServer(b, zap.NewNop(), &proxy.Route{Name: "oauth2_token", Method: http.MethodPost, Pattern: "/v1/oauth2/token", REST: ep})
	f := &tokenFixture{base: base, client: testClient(b)}
	for _, tc := range []struct {
		name, id, secret string
		status           int
	}{
		{"good", id, secret, 200},
		{"wrong_secret", id, secret + "x", 401},
		{"unknown_client", "w3g_nobody", secret, 401},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := form("grant_type", "client_credentials", "client_id", tc.id, "client_secret", tc.secret)
			for b.Loop() {
				if r := f.post(b, formType, body, nil); r.status != tc.status {
					b.Fatalf("status %d, want %d", r.status, tc.status)
				}
			}
		})
	}
}
