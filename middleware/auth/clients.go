package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/web3gate/web3gate/store"
)

// OIDCPrincipalPrefix starts the principal of every external OIDC token
// ("oidc:<issuer>|<claim>"). Local principals may not start with it, so the two can never
// collide.
const OIDCPrincipalPrefix = "oidc:"

// ValidPrincipal checks a local principal (of an OAuth client or a static token): not empty,
// no control characters, at most 256 bytes, and not in the namespace of OIDC principals.
func ValidPrincipal(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return errors.New("principal must not be empty")
	case len(p) > 256:
		return errors.New("principal is longer than 256 bytes")
	case strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return errors.New("principal contains a control character")
	case strings.HasPrefix(p, OIDCPrincipalPrefix):
		return fmt.Errorf("principal must not start with %q: that prefix is reserved for OIDC identities", OIDCPrincipalPrefix)
	}
	return nil
}

// CreateClient creates an OAuth2 client of the client-credentials grant that acts for
// principal with scopes (each one of AllScopes), stores it with only the argon2id hash of its
// secret, and returns the id and the secret. The secret cannot be recovered later: show it
// once.
func CreateClient(ctx context.Context, db *store.DB, principal string, scopes []string) (id, secret string, err error) {
	if err := ValidPrincipal(principal); err != nil {
		return "", "", fmt.Errorf("create client: %w", err)
	}
	if len(scopes) == 0 {
		return "", "", errors.New("create client: at least one scope is required")
	}
	known := AllScopes()
	var uniq []string
	for _, s := range scopes {
		if !slices.Contains(known, s) {
			return "", "", fmt.Errorf("create client: unknown scope %q (known: %s)", s, strings.Join(known, ", "))
		}
		if !slices.Contains(uniq, s) {
			uniq = append(uniq, s)
		}
	}
	id, secret, err = NewClientSecret()
	if err != nil {
		return "", "", fmt.Errorf("create client: %w", err)
	}
	hash, err := HashSecret(secret)
	if err != nil {
		return "", "", fmt.Errorf("create client: %w", err)
	}
	if err := db.AddClient(ctx, store.Client{ID: id, SecretHash: hash, Principal: principal, Scopes: uniq}); err != nil {
		return "", "", fmt.Errorf("create client: %w", err)
	}
	return id, secret, nil
}
