package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// FuzzParseBasic: any Authorization value is either refused or yields a non-empty id and
// secret, and every id and secret survive the RFC 6749 §2.3.1 encoding.
func FuzzParseBasic(f *testing.F) {
	for _, s := range []string{"Basic dzNnX2E6Yg==", "Basic !!!", "Basic", "basic  dzNnX2E6Yg==", "Bearer x", "Basic " + base64.StdEncoding.EncodeToString([]byte("a%3Ab:c%2B"))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		id, secret, ok := parseBasic(h)
		if ok && (id == "" || secret == "") {
			t.Fatalf("parseBasic(%q) accepted an empty part", h)
		}
		if !ok && (id != "" || secret != "") {
			t.Fatalf("parseBasic(%q) refused but returned values", h)
		}
		if h == "" {
			return
		}
		if id2, secret2, ok := parseBasic(basic(h, h+"s")); !ok || id2 != h || secret2 != h+"s" {
			t.Fatalf("round trip of %q: %q %q %v", h, id2, secret2, ok)
		}
	})
}

// FuzzParseScope: an accepted scope list holds only distinct, valid scope-tokens.
func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"eth_sign", " eth_sign  read ", `a"b`, "a\\b", "é", "a\tb", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		scopes, err := parseScope(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, sc := range scopes {
			if !validScopeToken(sc) || seen[sc] || !strings.Contains(s, sc) {
				t.Fatalf("parseScope(%q) = %q", s, scopes)
			}
			seen[sc] = true
		}
	})
}

// FuzzJWTVerifier: no input but the issued token itself is accepted, and none panics.
func FuzzJWTVerifier(f *testing.F) {
	key := testSigningKey(f)
	cfg := testOAuthConfig()
	iss, err := NewIssuer(cfg, key, fixedClock)
	if err != nil {
		f.Fatal(err)
	}
	token, _, err := iss.Issue("alice", "w3g_c", []string{ScopeSign})
	if err != nil {
		f.Fatal(err)
	}
	v := mustVerifier(f, cfg, key, fixedClock)
	parts := strings.Split(token, ".")
	for _, s := range []string{token, parts[0] + "." + parts[1] + ".", parts[0] + ".e30." + parts[2], "a.b.c", "..", token + "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := v.VerifyScoped(s)
		if err == nil && s != token {
			t.Fatalf("accepted a token that was not issued: %q → %+v", s, id)
		}
		if err != nil && !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("error %v does not wrap ErrInvalidToken", err)
		}
	})
}
