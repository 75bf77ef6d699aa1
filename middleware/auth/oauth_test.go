package auth

import (
	"context"
	"path/filepath"
	"testing"
)

// TestOAuthRestart: two replicas (or one process restarted) on one key file share the key:
// a token one issues, the other accepts.
func TestOAuthRestart(t *testing.T) {
	db := openStore(t)
	cfg := testOAuthConfig()
	cfg.SigningKeyFile = filepath.Join(t.TempDir(), "shared", "jwt-signing-key.pem")
	a, err := NewOAuth(t.Context(), cfg, OAuthDeps{Clients: db})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewOAuth(t.Context(), cfg, OAuthDeps{Clients: db})
	if err != nil {
		t.Fatal(err)
	}
	if a.KeyID() != b.KeyID() {
		t.Fatalf("kid %s after restart, was %s", b.KeyID(), a.KeyID())
	}
	iss, err := NewIssuer(cfg, a.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	clientID, _, err := CreateClient(t.Context(), db, "alice", []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := iss.Issue("alice", clientID, []string{ScopeSign})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := b.Chain(nil).VerifyScoped(token); err != nil || id.Principal != "alice" {
		t.Fatalf("the other replica: %+v, %v", id, err)
	}
}

func TestNewOAuthRefuses(t *testing.T) {
	cfg := testOAuthConfig()
	cfg.SigningKeyFile = filepath.Join(t.TempDir(), "k.pem")
	if _, err := NewOAuth(context.Background(), cfg, OAuthDeps{}); err == nil {
		t.Fatal("NewOAuth without a client store succeeded")
	}
	db := openStore(t)
	cfg.OIDC = []OIDCConfig{{Issuer: "https://idp.example.com/", JWKSURL: "::not a url", Audience: "a", PrincipalClaim: "sub"}}
	if _, err := NewOAuth(t.Context(), cfg, OAuthDeps{Clients: db}); err == nil {
		t.Fatal("NewOAuth with a malformed JWKS URL succeeded")
	}
}
