package auth

import (
	"errors"
	"fmt"
	"time"
)

// Identity is what an accepted access token says: whom the request acts for and what it may
// do. Scopes must not be modified by the receiver.
type Identity struct {
	Principal string
	Scopes    []string
	// Expires is the token's exp; zero for a token that does not expire (static tokens).
	Expires time.Time
}

// ScopedVerifier is a TokenVerifier that also reports the token's scopes. The auth stage uses
// it when its verifier implements it.
type ScopedVerifier interface {
	TokenVerifier
	// VerifyScoped returns the identity of token, or an error wrapping ErrInvalidToken.
	VerifyScoped(token string) (Identity, error)
}

// VerifyScoped implements ScopedVerifier: a static token from the config carries every scope.
func (s *StaticTokens) VerifyScoped(token string) (Identity, error) {
	p, err := s.Verify(token)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Principal: p, Scopes: allScopes}, nil
}

// allScopes is AllScopes shared by every static token's identity (Principal.Scopes is
// read-only), so that verifying one allocates nothing.
var allScopes = AllScopes()

// Chain asks its verifiers in order and returns the first identity one accepts: static
// tokens, then web3gate's own JWTs, then each OIDC issuer's.
type Chain struct {
	verifiers []ScopedVerifier
}

var (
	_ ScopedVerifier = (*Chain)(nil)
	_ ScopedVerifier = (*StaticTokens)(nil)
	_ ScopedVerifier = (*JWTVerifier)(nil)
	_ ScopedVerifier = (*OIDCVerifier)(nil)
)

// NewChain builds a chain of verifiers, asked in the order given.
func NewChain(verifiers ...ScopedVerifier) *Chain {
	return &Chain{verifiers: verifiers}
}

// VerifyScoped implements ScopedVerifier. When no verifier accepts the token the error wraps
// ErrInvalidToken and the last verifier's reason (never the token).
func (c *Chain) VerifyScoped(token string) (Identity, error) {
	if token == "" {
		return Identity{}, ErrInvalidToken
	}
	var last error
	for _, v := range c.verifiers {
		id, err := v.VerifyScoped(token)
		if err == nil {
			return id, nil
		}
		last = err
	}
	switch {
	case last == nil:
		return Identity{}, ErrInvalidToken
	case !errors.Is(last, ErrInvalidToken):
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, last)
	}
	return Identity{}, last
}

// Verify implements TokenVerifier.
func (c *Chain) Verify(token string) (string, error) {
	id, err := c.VerifyScoped(token)
	return id.Principal, err
}
