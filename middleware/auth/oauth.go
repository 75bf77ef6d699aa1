package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/proxy"
)

// OAuthDeps are the collaborators of the OAuth part of auth.
type OAuthDeps struct {
	// Clients finds the OAuth clients of the token endpoint (the *store.DB).
	Clients ClientStore
	Logger  *zap.Logger
	// HTTPClient fetches the OIDC providers' JWKS; nil is a client with a 10 s timeout.
	HTTPClient *http.Client
	// Registry receives the token endpoint's metrics; nil registers nothing.
	Registry prometheus.Registerer
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Flood bounds the token endpoint's warnings of refused requests (log.flood); nil: a
	// bound of the defaults.
	Flood *logx.Limiter
}

// OAuth is everything of auth.oauth, built once at start-up: the signing key, the token and
// JWKS endpoints, and the verifiers of web3gate's own tokens and of each OIDC issuer's.
type OAuth struct {
	key       *SigningKey
	token     *TokenEndpoint
	own       *JWTVerifier
	oidc      []*OIDCVerifier
	jwksRoute proxy.RESTHandler
}

// NewOAuth loads (or creates) the signing key and builds the endpoints and verifiers of a
// validated, defaulted config. ctx ends the OIDC key refresh goroutines.
func NewOAuth(ctx context.Context, cfg OAuthConfig, deps OAuthDeps) (*OAuth, error) {
	if deps.Clients == nil {
		return nil, errors.New("oauth: a client store is required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	key, err := LoadOrCreateSigningKey(cfg.SigningKeyFile, log)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	issuer, err := NewIssuer(cfg, key, deps.Now)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	token, err := NewTokenEndpoint(cfg, TokenEndpointDeps{Clients: deps.Clients, Issuer: issuer, Logger: log, Registry: deps.Registry, Now: deps.Now, Flood: deps.Flood})
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	own, err := NewJWTVerifier(cfg, JWTVerifierDeps{Key: key, Clients: deps.Clients, Logger: log, Now: deps.Now})
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	o := &OAuth{key: key, token: token, own: own, jwksRoute: NewJWKSHandler(key)}
	for i, oc := range cfg.OIDC {
		v, err := NewOIDCVerifier(ctx, oc, OIDCDeps{Logger: log, Client: deps.HTTPClient, Now: deps.Now})
		if err != nil {
			return nil, fmt.Errorf("oauth: oidc[%d]: %w", i, err)
		}
		o.oidc = append(o.oidc, v)
	}
	return o, nil
}

// TokenHandler serves POST /v1/oauth2/token.
func (o *OAuth) TokenHandler() proxy.RESTHandler { return o.token }

// JWKSHandler serves GET /v1/oauth2/jwks.
func (o *OAuth) JWKSHandler() proxy.RESTHandler { return o.jwksRoute }

// KeyID is the kid of the signing key.
func (o *OAuth) KeyID() string { return o.key.KeyID() }

// Chain is the verifier of the auth stage: first, then web3gate's own JWTs, then each OIDC
// issuer's tokens. first is the static tokens of auth.tokens (nil: none).
func (o *OAuth) Chain(first ScopedVerifier) *Chain {
	vs := make([]ScopedVerifier, 0, 2+len(o.oidc))
	if first != nil {
		vs = append(vs, first)
	}
	vs = append(vs, o.own)
	for _, v := range o.oidc {
		vs = append(vs, v)
	}
	return NewChain(vs...)
}

// NewJWKSHandler serves the public key of key as a JWK Set, for replicas and services that
// verify web3gate's tokens. The document is built once; caches may keep it five minutes.
func NewJWKSHandler(key *SigningKey) proxy.RESTHandler {
	body := key.JWKS()
	return proxy.RESTHandlerFunc(func(*proxy.RESTRequest) (*proxy.RESTResponse, error) {
		return &proxy.RESTResponse{Body: body, Header: map[string]string{"Cache-Control": "public, max-age=300"}}, nil
	})
}
