package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func fixedClock() time.Time { return testNow }

func testSigningKey(t testing.TB) *SigningKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewSigningKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testOAuthConfig() OAuthConfig {
	var c OAuthConfig
	c.SetDefaults()
	return c
}

// signed builds a JWT with header and claims signed by method and key.
func signed(t testing.TB, method jwt.SigningMethod, key any, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// goodClaims are the claims of a valid token at testNow.
func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{"iss": DefaultIssuer, "sub": "alice", "aud": DefaultAudience, "scope": ScopeSign,
		"iat": testNow.Add(-time.Minute).Unix(), "exp": testNow.Add(time.Hour).Unix(), "jti": "j1"}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// encodeUnsigned builds header.claims.sig by hand, for tokens no library would sign.
func encodeUnsigned(t testing.TB, header map[string]any, claims jwt.MapClaims, sig string) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "." + sig
}

func TestIssuedTokenVerifies(t *testing.T) {
	key := testSigningKey(t)
	cfg := testOAuthConfig()
	iss, err := NewIssuer(cfg, key, fixedClock)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewJWTVerifier(cfg, JWTVerifierDeps{Key: key, Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	token, jti, err := iss.Issue("alice", "w3g_client", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.VerifyScoped(token)
	if err != nil {
		t.Fatal(err)
	}
	if id.Principal != "alice" || !slices.Equal(id.Scopes, []string{ScopeSign}) || !id.Expires.Equal(fixedClock().Truncate(time.Second).Add(cfg.TokenTTL)) {
		t.Fatalf("identity = %+v", id)
	}
	// Verified again from the cache of verified tokens: the same identity, expiry included.
	if again, err := v.VerifyScoped(token); err != nil || !again.Expires.Equal(id.Expires) {
		t.Fatalf("second verification = %+v, %v", again, err)
	}
	if p, err := v.Verify(token); err != nil || p != "alice" {
		t.Fatalf("Verify = %q, %v", p, err)
	}

	// The claims and header are the documented ones.
	parts := strings.Split(token, ".")
	var header map[string]any
	var claims map[string]any
	for i, dst := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	if header["alg"] != "EdDSA" || header["typ"] != "at+jwt" || header["kid"] != key.KeyID() {
		t.Fatalf("header = %v", header)
	}
	want := map[string]any{"iss": "web3gate", "sub": "alice", "aud": []any{"web3gate"}, "scope": "eth_sign",
		"client_id": "w3g_client", "jti": jti, "iat": float64(testNow.Unix()), "exp": float64(testNow.Add(time.Hour).Unix())}
	b1, _ := json.Marshal(claims)
	b2, _ := json.Marshal(want)
	if string(b1) != string(b2) {
		t.Fatalf("claims = %s, want %s", b1, b2)
	}

	// Within the leeway an expired token still passes; beyond it, not.
	late := func(d time.Duration) func() time.Time { return func() time.Time { return testNow.Add(time.Hour + d) } }
	if _, err := mustVerifier(t, cfg, key, late(20*time.Second)).VerifyScoped(token); err != nil {
		t.Fatalf("20 s after exp: %v", err)
	}
	if _, err := mustVerifier(t, cfg, key, late(40*time.Second)).VerifyScoped(token); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("40 s after exp: %v", err)
	}
}

func mustVerifier(t testing.TB, cfg OAuthConfig, key *SigningKey, now func() time.Time) *JWTVerifier {
	t.Helper()
	v, err := NewJWTVerifier(cfg, JWTVerifierDeps{Key: key, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestJWTVerifierRefuses(t *testing.T) {
	key := testSigningKey(t)
	other := testSigningKey(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, testOAuthConfig(), key, fixedClock)
	hdr := map[string]any{"kid": key.KeyID(), "typ": "at+jwt"}
	good := signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, goodClaims())
	if _, err := v.VerifyScoped(good); err != nil {
		t.Fatalf("the control token is refused: %v", err)
	}
	parts := strings.Split(good, ".")
	flipped := []byte(parts[2])
	flipped[5] ^= 0x01
	forged, _ := json.Marshal(with(goodClaims(), "sub", "mallory"))

	for _, tc := range []struct{ name, token string }{
		{"empty", ""},
		{"not a JWT", "dev-access-token"},
		{"four segments", good + ".x"},
		{"expired", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "exp", testNow.Add(-time.Minute).Unix()))},
		{"not yet valid", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "nbf", testNow.Add(2*time.Minute).Unix()))},
		{"issued in the future", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "iat", testNow.Add(2*time.Minute).Unix()))},
		{"no exp", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "exp", nil))},
		{"wrong audience", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "aud", "other-service"))},
		{"no audience", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "aud", nil))},
		{"wrong issuer", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "iss", "https://evil.example"))},
		{"no sub", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "sub", nil))},
		{"OIDC-namespace sub", signed(t, jwt.SigningMethodEdDSA, key.priv, hdr, with(goodClaims(), "sub", "oidc:https://idp.example|bob"))},
		{"tampered claims", parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]},
		{"tampered signature", parts[0] + "." + parts[1] + "." + string(flipped)},
		{"signature stripped", parts[0] + "." + parts[1] + "."},
		{"padded signature", good + "="},
		{"alg none", encodeUnsigned(t, map[string]any{"alg": "none", "typ": "at+jwt", "kid": key.KeyID()}, goodClaims(), "")},
		{"alg None", encodeUnsigned(t, map[string]any{"alg": "None", "typ": "at+jwt", "kid": key.KeyID()}, goodClaims(), "")},
		{"no alg", encodeUnsigned(t, map[string]any{"typ": "at+jwt", "kid": key.KeyID()}, goodClaims(), parts[2])},
		{"HS256 with the public key as secret", signed(t, jwt.SigningMethodHS256, []byte(key.PublicKey()), hdr, goodClaims())},
		{"HS256 with the JWKS as secret", signed(t, jwt.SigningMethodHS256, key.JWKS(), hdr, goodClaims())},
		{"HS256 with the x member as secret", signed(t, jwt.SigningMethodHS256, []byte(base64.RawURLEncoding.EncodeToString(key.PublicKey())), hdr, goodClaims())},
		{"RS256 with another key", signed(t, jwt.SigningMethodRS256, rsaKey, hdr, goodClaims())},
		{"EdDSA by another key under our kid", signed(t, jwt.SigningMethodEdDSA, other.priv, hdr, goodClaims())},
		{"EdDSA by another key under its kid", signed(t, jwt.SigningMethodEdDSA, other.priv, map[string]any{"kid": other.KeyID(), "typ": "at+jwt"}, goodClaims())},
		{"no kid", signed(t, jwt.SigningMethodEdDSA, key.priv, map[string]any{"typ": "at+jwt"}, goodClaims())},
		{"typ JWT", signed(t, jwt.SigningMethodEdDSA, key.priv, map[string]any{"kid": key.KeyID(), "typ": "JWT"}, goodClaims())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.VerifyScoped(tc.token)
			if !errors.Is(err, ErrInvalidToken) || id.Principal != "" {
				t.Fatalf("VerifyScoped = %+v, %v; want ErrInvalidToken", id, err)
			}
		})
	}
}

// BenchmarkVerify compares one JWT verification with the static-token lookup it follows in
// the chain: the ratio is the cost of a JWT bearer over a static one.
func BenchmarkVerify(b *testing.B) {
	key := testSigningKey(b)
	cfg := testOAuthConfig()
	iss, err := NewIssuer(cfg, key, nil)
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := iss.Issue("alice", "w3g_client", []string{ScopeSign})
	if err != nil {
		b.Fatal(err)
	}
	v := mustVerifier(b, cfg, key, nil)
	static, err := NewStaticTokens([]TokenConfig{{SHA256: hash("static-token"), Principal: "bob"}})
	if err != nil {
		b.Fatal(err)
	}
	chain := NewChain(static, v)
	// The verifier of a server: it checks the client's state, read from the store once.
	db := openStore(b)
	clientID, _, err := CreateClient(context.Background(), db, "alice", []string{ScopeSign})
	if err != nil {
		b.Fatal(err)
	}
	revocable, err := NewJWTVerifier(cfg, JWTVerifierDeps{Key: key, Clients: db})
	if err != nil {
		b.Fatal(err)
	}
	clientToken, _, err := iss.Issue("alice", clientID, []string{ScopeSign})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("static", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := static.VerifyScoped("static-token"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jwt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.VerifyScoped(token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jwt_client_state", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := revocable.VerifyScoped(clientToken); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chain_jwt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := chain.VerifyScoped(token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestVerifiedCacheDoesNotOutliveExp: a token verified once is answered from the cache, and
// stops verifying when it expires like one never seen; a tampered copy never hits the cache.
func TestVerifiedCacheDoesNotOutliveExp(t *testing.T) {
	key := testSigningKey(t)
	cfg := testOAuthConfig()
	now := fixedClock()
	clock := func() time.Time { return now }
	iss, err := NewIssuer(cfg, key, clock)
	if err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, cfg, key, clock)
	token, _, err := iss.Issue("alice", "w3g_client", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if id, err := v.VerifyScoped(token); err != nil || id.Principal != "alice" || !HasScope(id.Scopes, ScopeSign) {
			t.Fatalf("verify: %+v %v", id, err)
		}
	}
	if len(v.verified) != 1 {
		t.Fatalf("%d cached tokens, want 1", len(v.verified))
	}
	// Change a signature character well before the end: the last characters of the base64url
	// signature carry padding bits, so replacing them can leave the signature as it was.
	tampered := []byte(token)
	if i := len(tampered) - 10; tampered[i] == 'A' {
		tampered[i] = 'B'
	} else {
		tampered[i] = 'A'
	}
	if _, err := v.VerifyScoped(string(tampered)); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("tampered copy: %v", err)
	}
	now = now.Add(cfg.TokenTTL + clockLeeway + time.Second)
	if _, err := v.VerifyScoped(token); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("expired cached token: %v", err)
	}
}
