package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const testIdP = "https://idp.example.com/"

// idp is a real HTTP server publishing a JWKS whose keys a test can change.
type idp struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu   sync.Mutex
	keys []map[string]string
}

func newIdP(t testing.TB) *idp {
	t.Helper()
	p := &idp{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks" {
			http.NotFound(w, r)
			return
		}
		p.fetches.Add(1)
		p.mu.Lock()
		b, err := json.Marshal(map[string]any{"keys": p.keys})
		p.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) url() string { return p.srv.URL + "/jwks" }

func (p *idp) addRSA(kid string, pub *rsa.PublicKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())})
}

func (p *idp) addEC(t *testing.T, kid string, pub *ecdsa.PublicKey) {
	t.Helper()
	e, err := pub.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	pt := e.Bytes() // 0x04 || X || Y
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, map[string]string{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
		"x": base64.RawURLEncoding.EncodeToString(pt[1:33]), "y": base64.RawURLEncoding.EncodeToString(pt[33:])})
}

func oidcClaims() jwt.MapClaims {
	return jwt.MapClaims{"iss": testIdP, "sub": "user-123", "aud": "web3gate-api", "email": "u@example.com",
		"scope": "openid eth_sign", "iat": testNow.Add(-time.Minute).Unix(), "exp": testNow.Add(time.Hour).Unix()}
}

func newOIDC(t testing.TB, p *idp, claim string) *OIDCVerifier {
	t.Helper()
	cfg := OAuthConfig{OIDC: []OIDCConfig{{Issuer: testIdP, JWKSURL: p.url(), Audience: "web3gate-api", PrincipalClaim: claim}}}
	cfg.SetDefaults()
	v, err := NewOIDCVerifier(t.Context(), cfg.OIDC[0], OIDCDeps{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOIDCAccepts(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := newIdP(t)
	p.addRSA("rsa1", &rsaKey.PublicKey)
	p.addEC(t, "ec1", &ecKey.PublicKey)
	bySub := newOIDC(t, p, "")
	byEmail := newOIDC(t, p, "email")
	for _, tc := range []struct {
		name   string
		v      *OIDCVerifier
		token  string
		want   string
		scopes []string
	}{
		{"RS256, sub", bySub, signed(t, jwt.SigningMethodRS256, rsaKey, map[string]any{"kid": "rsa1"}, oidcClaims()),
			"oidc:https://idp.example.com/|user-123", []string{"openid", "eth_sign"}},
		{"ES256, scp array", bySub, signed(t, jwt.SigningMethodES256, ecKey, map[string]any{"kid": "ec1"},
			with(with(oidcClaims(), "scope", nil), "scp", []string{"eth_sign"})), "oidc:https://idp.example.com/|user-123", []string{"eth_sign"}},
		{"aud array", bySub, signed(t, jwt.SigningMethodRS256, rsaKey, map[string]any{"kid": "rsa1"},
			with(oidcClaims(), "aud", []string{"other", "web3gate-api"})), "oidc:https://idp.example.com/|user-123", []string{"openid", "eth_sign"}},
		{"no scope", bySub, signed(t, jwt.SigningMethodRS256, rsaKey, map[string]any{"kid": "rsa1"}, with(oidcClaims(), "scope", nil)),
			"oidc:https://idp.example.com/|user-123", nil},
		{"no kid: every key is tried", bySub, signed(t, jwt.SigningMethodRS256, rsaKey, nil, oidcClaims()),
			"oidc:https://idp.example.com/|user-123", []string{"openid", "eth_sign"}},
		{"principal claim email", byEmail, signed(t, jwt.SigningMethodRS256, rsaKey, map[string]any{"kid": "rsa1"}, oidcClaims()),
			"oidc:https://idp.example.com/|u@example.com", []string{"openid", "eth_sign"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.v.VerifyScoped(tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if id.Principal != tc.want || !slices.Equal(id.Scopes, tc.scopes) || !id.Expires.Equal(testNow.Add(time.Hour).Truncate(time.Second)) {
				t.Fatalf("identity = %+v, want %s %q expiring at the exp claim", id, tc.want, tc.scopes)
			}
		})
	}
}

func TestOIDCRefuses(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	strange, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := newIdP(t)
	p.addRSA("rsa1", &rsaKey.PublicKey)
	v := newOIDC(t, p, "")
	own := testSigningKey(t)
	pubDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	kid := map[string]any{"kid": "rsa1"}
	good := signed(t, jwt.SigningMethodRS256, rsaKey, kid, oidcClaims())
	if _, err := v.VerifyScoped(good); err != nil {
		t.Fatalf("the control token is refused: %v", err)
	}
	parts := strings.Split(good, ".")
	forged, _ := json.Marshal(with(oidcClaims(), "sub", "admin"))
	for _, tc := range []struct{ name, token string }{
		{"wrong audience", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "aud", "web3gate"))},
		{"no audience", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "aud", nil))},
		{"wrong issuer", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "iss", "https://evil.example.com/"))},
		{"issuer without the trailing slash", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "iss", strings.TrimSuffix(testIdP, "/")))},
		{"expired", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "exp", testNow.Add(-time.Minute).Unix()))},
		{"no exp", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "exp", nil))},
		{"not yet valid", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "nbf", testNow.Add(time.Hour).Unix()))},
		{"no sub", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "sub", nil))},
		{"sub not a string", signed(t, jwt.SigningMethodRS256, rsaKey, kid, with(oidcClaims(), "sub", 42))},
		{"tampered", parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]},
		{"another key under a known kid", signed(t, jwt.SigningMethodRS256, strange, kid, oidcClaims())},
		{"another key under an unknown kid", signed(t, jwt.SigningMethodRS256, strange, map[string]any{"kid": "rsa9"}, oidcClaims())},
		{"HS256 with the public key PEM as secret", signed(t, jwt.SigningMethodHS256, pubPEM, kid, oidcClaims())},
		{"HS256 with the modulus as secret", signed(t, jwt.SigningMethodHS256, rsaKey.N.Bytes(), kid, oidcClaims())},
		{"RS512", signed(t, jwt.SigningMethodRS512, rsaKey, kid, oidcClaims())},
		{"PS256", signed(t, jwt.SigningMethodPS256, rsaKey, kid, oidcClaims())},
		{"alg none", encodeUnsigned(t, map[string]any{"alg": "none", "kid": "rsa1"}, oidcClaims(), "")},
		{"web3gate's own token", signed(t, jwt.SigningMethodEdDSA, own.priv, map[string]any{"kid": own.KeyID(), "typ": "at+jwt"}, goodClaims())},
		{"not a JWT", "opaque-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.VerifyScoped(tc.token)
			if !errors.Is(err, ErrInvalidToken) || id.Principal != "" {
				t.Fatalf("VerifyScoped = %+v, %v; want ErrInvalidToken", id, err)
			}
		})
	}
}

// TestOIDCKeyRotation: a token signed with a key the provider published after start is
// accepted after one refresh; a token of another issuer never causes a fetch.
func TestOIDCKeyRotation(t *testing.T) {
	k1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := newIdP(t)
	p.addRSA("k1", &k1.PublicKey)
	v := newOIDC(t, p, "")
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches at start, want 1", n)
	}
	other := signed(t, jwt.SigningMethodRS256, k2, map[string]any{"kid": "k2"}, with(oidcClaims(), "iss", "https://other.example.com/"))
	if _, err := v.VerifyScoped(other); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("another issuer's token: %v", err)
	}
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("another issuer's token caused a JWKS fetch (%d fetches)", n)
	}
	p.addRSA("k2", &k2.PublicKey)
	rotated := signed(t, jwt.SigningMethodRS256, k2, map[string]any{"kid": "k2"}, oidcClaims())
	if _, err := v.VerifyScoped(rotated); err != nil {
		t.Fatalf("token of the rotated-in key: %v", err)
	}
	if n := p.fetches.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (start, unknown kid)", n)
	}
}

// TestOIDCProviderDown: an unreachable provider does not stop the start; it is logged, and
// its tokens are refused until its keys can be fetched.
func TestOIDCProviderDown(t *testing.T) {
	log, logs := observedLogger()
	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL + "/jwks"
	down.Close()
	v, err := NewOIDCVerifier(t.Context(), OIDCConfig{Issuer: testIdP, JWKSURL: url, Audience: "web3gate-api", PrincipalClaim: "sub"},
		OIDCDeps{Logger: log, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessage("JWKS fetch failed").Len() != 1 {
		t.Fatalf("the failed fetch is not logged: %v", logs.All())
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyScoped(signed(t, jwt.SigningMethodRS256, k, map[string]any{"kid": "k"}, oidcClaims())); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("VerifyScoped = %v", err)
	}
}

// TestChainOrder: static tokens, then web3gate's JWTs, then OIDC; principals of the three
// never collide, and a token none accepts is ErrInvalidToken.
func TestChainOrder(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := newIdP(t)
	p.addRSA("rsa1", &rsaKey.PublicKey)
	key := testSigningKey(t)
	cfg := testOAuthConfig()
	iss, err := NewIssuer(cfg, key, fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	own := mustVerifier(t, cfg, key, fixedClock)
	static, err := NewStaticTokens([]TokenConfig{{SHA256: hash("static"), Principal: "user-123"}})
	if err != nil {
		t.Fatal(err)
	}
	chain := NewChain(static, own, newOIDC(t, p, ""))
	jwtTok, _, err := iss.Issue("user-123", "w3g_c", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	oidcTok := signed(t, jwt.SigningMethodRS256, rsaKey, map[string]any{"kid": "rsa1"}, oidcClaims())
	for _, tc := range []struct {
		name, token, principal string
		scopes                 []string
	}{
		{"static", "static", "user-123", AllScopes()},
		{"own JWT", jwtTok, "user-123", []string{ScopeSign}},
		{"OIDC", oidcTok, "oidc:https://idp.example.com/|user-123", []string{"openid", "eth_sign"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := chain.VerifyScoped(tc.token)
			if err != nil || id.Principal != tc.principal || !slices.Equal(id.Scopes, tc.scopes) {
				t.Fatalf("VerifyScoped = %+v, %v; want %s %q", id, err, tc.principal, tc.scopes)
			}
			if p, err := chain.Verify(tc.token); err != nil || p != tc.principal {
				t.Fatalf("Verify = %q, %v", p, err)
			}
		})
	}
	for _, bad := range []string{"", "nope", jwtTok + "x", oidcTok[:len(oidcTok)-2]} {
		if id, err := chain.VerifyScoped(bad); !errors.Is(err, ErrInvalidToken) || id.Principal != "" {
			t.Fatalf("VerifyScoped(bad) = %+v, %v", id, err)
		}
	}
}

// TestOIDCIssuersDoNotCross: with two identity providers, a token signed by one provider's
// key is never accepted as the other's, whichever iss it claims, and the same user name at
// the two providers gives two principals.
func TestOIDCIssuersDoNotCross(t *testing.T) {
	const issA, issB = "https://a.example.com/", "https://b.example.com/"
	keyA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := newIdP(t), newIdP(t)
	pa.addRSA("k1", &keyA.PublicKey)
	pb.addRSA("k1", &keyB.PublicKey) // the same kid at both
	verifier := func(issuer string, p *idp) *OIDCVerifier {
		v, err := NewOIDCVerifier(t.Context(), OIDCConfig{Issuer: issuer, JWKSURL: p.url(), Audience: "web3gate-api", PrincipalClaim: "sub"}, OIDCDeps{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	chain := NewChain(verifier(issA, pa), verifier(issB, pb))
	kid := map[string]any{"kid": "k1"}
	for _, tc := range []struct{ name, token, principal string }{
		{"A's token", signed(t, jwt.SigningMethodRS256, keyA, kid, with(oidcClaims(), "iss", issA)), "oidc:" + issA + "|user-123"},
		{"B's token", signed(t, jwt.SigningMethodRS256, keyB, kid, with(oidcClaims(), "iss", issB)), "oidc:" + issB + "|user-123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, err := chain.VerifyScoped(tc.token); err != nil || id.Principal != tc.principal {
				t.Fatalf("VerifyScoped = %+v, %v; want %s", id, err, tc.principal)
			}
		})
	}
	for _, tc := range []struct{ name, token string }{
		{"A's key claiming B", signed(t, jwt.SigningMethodRS256, keyA, kid, with(oidcClaims(), "iss", issB))},
		{"B's key claiming A", signed(t, jwt.SigningMethodRS256, keyB, kid, with(oidcClaims(), "iss", issA))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, err := chain.VerifyScoped(tc.token); !errors.Is(err, ErrInvalidToken) || id.Principal != "" {
				t.Fatalf("VerifyScoped = %+v, %v; want ErrInvalidToken", id, err)
			}
		})
	}
}

// BenchmarkOIDCVerify is one RS256 OIDC token verification with its key cached.
func BenchmarkOIDCVerify(b *testing.B) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	p := newIdP(b)
	p.addRSA("rsa1", &k.PublicKey)
	v := newOIDC(b, p, "")
	token := signed(b, jwt.SigningMethodRS256, k, map[string]any{"kid": "rsa1"}, oidcClaims())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.VerifyScoped(token); err != nil {
			b.Fatal(err)
		}
	}
}
