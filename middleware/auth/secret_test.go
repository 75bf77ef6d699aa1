package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/store"
)

func TestNewClientSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, secret, err := NewClientSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(id, ClientIDPrefix) {
			t.Fatalf("id %q lacks the %q prefix", id, ClientIDPrefix)
		}
		idBits, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, ClientIDPrefix))
		if err != nil || len(idBits) < 16 {
			t.Fatalf("id %q: %d random bytes, %v; want ≥ 16, base64url", id, len(idBits), err)
		}
		secretBits, err := base64.RawURLEncoding.DecodeString(secret)
		if err != nil || len(secretBits) < 16 {
			t.Fatalf("secret: %d random bytes, %v; want ≥ 16, base64url", len(secretBits), err)
		}
		if seen[id] || seen[secret] {
			t.Fatal("NewClientSecret repeated a value")
		}
		seen[id], seen[secret] = true, true
	}
}

func TestHashSecret(t *testing.T) {
	const secret = "correct horse battery staple"
	h1, err := HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h1, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q is not PHC argon2id with the chosen parameters", h1)
	}
	if h1 == h2 {
		t.Fatal("two hashes of one secret are equal: the salt is not random")
	}
	if strings.Contains(h1, secret) {
		t.Fatal("the hash contains the secret")
	}
	for _, h := range []string{h1, h2} {
		if !VerifySecret(h, secret) {
			t.Fatalf("VerifySecret(%q, secret) = false", h)
		}
	}
	if _, err := HashSecret(""); err == nil {
		t.Fatal("HashSecret(\"\") succeeded")
	}
}

// The decoy verified against for an unknown client id has the parameters, salt and key lengths
// of a real hash (so verifying against it costs the same), differs at every call, and verifies
// no secret.
func TestDecoyHash(t *testing.T) {
	stored, err := HashSecret("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	rp, rsalt, rkey, err := decodeArgon2id(stored)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := decoyHash()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := decoyHash()
	if err != nil {
		t.Fatal(err)
	}
	if d1 == d2 {
		t.Fatal("two decoys are equal: salt and key are not random")
	}
	dp, dsalt, dkey, err := decodeArgon2id(d1)
	if err != nil {
		t.Fatalf("decoy %q does not decode: %v", d1, err)
	}
	if dp != rp || len(dsalt) != len(rsalt) || len(dkey) != len(rkey) {
		t.Fatalf("decoy %q: parameters %+v, salt %d and key %d bytes; a real hash %q: %+v, %d, %d",
			d1, dp, len(dsalt), len(dkey), stored, rp, len(rsalt), len(rkey))
	}
	for _, secret := range []string{"", "correct horse battery staple", "x"} {
		if VerifySecret(d1, secret) {
			t.Fatalf("VerifySecret(decoy, %q) = true", secret)
		}
	}
}

func TestVerifySecretRefuses(t *testing.T) {
	const secret = "s3cret"
	good, err := HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, "$")
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	for _, tc := range []struct{ name, encoded, secret string }{
		{"wrong secret", good, "s3cres"},
		{"empty secret", good, ""},
		{"prefix of the secret", good, "s3cre"},
		{"empty hash", "", secret},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", secret},
		{"argon2i", with(1, "argon2i"), secret},
		{"old version", with(2, "v=16"), secret},
		{"missing parameter", with(3, "m=19456,t=2"), secret},
		{"unknown parameter", with(3, "m=19456,t=2,p=1,x=3"), secret},
		{"memory too large", with(3, "m=4194304,t=2,p=1"), secret},
		{"zero passes", with(3, "m=19456,t=0,p=1"), secret},
		{"too many passes", with(3, "m=19456,t=1000,p=1"), secret},
		{"malformed salt", with(4, "!!!"), secret},
		{"short hash", with(5, "AAAA"), secret},
		{"other hash", with(5, strings.Repeat("A", 43)), secret},
		{"extra field", good + "$x", secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if VerifySecret(tc.encoded, tc.secret) {
				t.Fatal("VerifySecret = true")
			}
		})
	}
}

func TestCreateClient(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	id, secret, err := CreateClient(ctx, db, "alice", []string{ScopeSign, ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Client(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Principal != "alice" || len(c.Scopes) != 1 || c.Scopes[0] != ScopeSign || c.DisabledAt != nil {
		t.Fatalf("stored client = %v", c)
	}
	if c.SecretHash == secret || strings.Contains(c.SecretHash, secret) || !strings.HasPrefix(c.SecretHash, "$argon2id$") {
		t.Fatal("the store holds the secret, not its argon2id hash")
	}
	if !VerifySecret(c.SecretHash, secret) {
		t.Fatal("the stored hash does not verify the returned secret")
	}
	if time.Since(c.CreatedAt) > time.Minute {
		t.Fatalf("CreatedAt = %v", c.CreatedAt)
	}
}

func TestCreateClientRefuses(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	for _, tc := range []struct {
		name      string
		principal string
		scopes    []string
		want      string
	}{
		{"no principal", "", []string{ScopeSign}, "principal must not be empty"},
		{"oidc principal", "oidc:https://idp.example|bob", []string{ScopeSign}, "reserved for OIDC"},
		{"control character", "al\nice", []string{ScopeSign}, "control character"},
		{"no scopes", "alice", nil, "at least one scope"},
		{"unknown scope", "alice", []string{"eth-sign"}, `unknown scope "eth-sign"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := CreateClient(ctx, db, tc.principal, tc.scopes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CreateClient = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := db.Client(ctx, "w3g_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lookup of a never created client = %v", err)
	}
}

// BenchmarkHashSecret is one argon2id hash with the chosen parameters: the cost of
// CreateClient and, as VerifySecret costs the same, of each token request.
func BenchmarkHashSecret(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HashSecret("benchmark-secret"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifySecret(b *testing.B) {
	h, err := HashSecret("benchmark-secret")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !VerifySecret(h, "benchmark-secret") {
			b.Fatal("no match")
		}
	}
}
