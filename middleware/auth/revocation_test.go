package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestRevocation: the tokens of a disabled client stop verifying once the verifier re-reads
// the client's state (revocationCheckInterval after its last read, cached token or not), and
// verify again once it is enabled; a verifier that never read the state (another replica)
// refuses at once. Tokens of a client that is not stored, and tokens without client_id, are
// refused.
func TestRevocation(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	key := testSigningKey(t)
	cfg := testOAuthConfig() // revocationCheckInterval 10s
	clock := newTestClock()
	iss, err := NewIssuer(cfg, key, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	newVerifier := func() *JWTVerifier {
		v, err := NewJWTVerifier(cfg, JWTVerifierDeps{Key: key, Clients: db, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := newVerifier()
	id, _, err := CreateClient(ctx, db, "alice", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := iss.Issue("alice", id, []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	accepted := func(step string, v *JWTVerifier) {
		t.Helper()
		if got, err := v.VerifyScoped(token); err != nil || got.Principal != "alice" {
			t.Fatalf("%s: refused: %+v, %v", step, got, err)
		}
	}
	refused := func(step string, v *JWTVerifier) {
		t.Helper()
		if got, err := v.VerifyScoped(token); !errors.Is(err, errClientDisabled) || !errors.Is(err, ErrInvalidToken) || got.Principal != "" {
			t.Fatalf("%s: %+v, %v; want refused as disabled", step, got, err)
		}
	}
	accepted("enabled", v)
	accepted("enabled, cached", v)

	if _, err := db.DisableClient(ctx, id, clock.Now()); err != nil {
		t.Fatal(err)
	}
	accepted("disabled, within the interval of the last read", v)
	refused("disabled, on a replica that never read the state", newVerifier())
	clock.Advance(cfg.RevocationCheckInterval)
	refused("disabled, one interval later", v)
	clock.Advance(time.Second)
	refused("disabled, later still", v)

	if _, err := db.EnableClient(ctx, id); err != nil {
		t.Fatal(err)
	}
	refused("enabled again, before the next read", v)
	clock.Advance(cfg.RevocationCheckInterval)
	accepted("enabled again, one interval later", v)

	for name, tok := range map[string]string{
		"a client that is not stored": mustIssue(t, iss, "carol", "w3g_nobody"),
		"no client_id": signed(t, jwt.SigningMethodEdDSA, key.priv, map[string]any{"kid": key.KeyID(), "typ": "at+jwt"},
			with(with(with(goodClaims(), "iat", clock.Now().Add(-time.Minute).Unix()), "exp", clock.Now().Add(time.Hour).Unix()), "client_id", nil)),
	} {
		v := newVerifier()
		if got, err := v.VerifyScoped(tok); !errors.Is(err, ErrInvalidToken) || errors.Is(err, errClientStateUnset) || got.Principal != "" {
			t.Fatalf("%s: %+v, %v; want ErrInvalidToken", name, got, err)
		}
	}

	// The store cannot be read: the last state read stays in force; a client never read is
	// refused.
	other, _, err := CreateClient(ctx, db, "bob", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	otherToken, _, err := iss.Issue("bob", other, []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(cfg.RevocationCheckInterval)
	accepted("store closed, last state enabled", v)
	if _, err := v.VerifyScoped(otherToken); !errors.Is(err, errClientStateUnset) {
		t.Fatalf("store closed, a client never read: %v, want errClientStateUnset", err)
	}
}

func mustIssue(t *testing.T, iss *Issuer, principal, clientID string) string {
	t.Helper()
	tok, _, err := iss.Issue(principal, clientID, []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
