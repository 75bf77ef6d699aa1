package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// JWKS fetching: keys are refreshed every jwksRefresh, and at once (at most every
// jwksUnknownKID) when a token names a key id not in the set, so a provider's key rotation
// is picked up without a restart. A token verification waits at most jwksWait for that.
const (
	jwksRefresh     = time.Hour
	jwksUnknownKID  = time.Minute
	jwksWait        = 5 * time.Second
	jwksHTTPTimeout = 10 * time.Second
	jwksMaxBytes    = 1 << 20
)

// OIDCDeps are an OIDC verifier's collaborators.
type OIDCDeps struct {
	// Logger receives JWKS refresh failures; nil discards them.
	Logger *zap.Logger
	// Client fetches the JWKS; nil is a client with a 10 s timeout.
	Client *http.Client
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// OIDCVerifier accepts the tokens of one external OpenID Connect issuer: RS256 or ES256
// signatures by a key of its JWKS, its iss, the configured aud, exp required, nbf honoured.
// The principal is "oidc:<issuer>|<principal claim>"; the scopes are the token's `scope`
// (space-separated) or `scp` (array) claim.
type OIDCVerifier struct {
	issuer string
	claim  string
	prefix string
	keys   keyfunc.Keyfunc
	parser *jwt.Parser
}

// NewOIDCVerifier builds the verifier of one validated issuer and fetches its JWKS once. A
// provider that cannot be reached does not stop the start: the failure is logged and the
// keys are fetched again on refresh and on first use. ctx ends the refresh goroutine.
func NewOIDCVerifier(ctx context.Context, cfg OIDCConfig, deps OIDCDeps) (*OIDCVerifier, error) {
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	client := deps.Client
	if client == nil {
		client = &http.Client{Timeout: jwksHTTPTimeout}
	}
	limited := *client
	limited.Transport = limitBody{base: client.Transport, max: jwksMaxBytes}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	keys, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		Client:            &limited,
		HTTPTimeout:       jwksHTTPTimeout,
		RefreshInterval:   jwksRefresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(jwksUnknownKID), 1),
		RateLimitWaitMax:  jwksWait,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Warn("JWKS fetch failed", zap.String("issuer", cfg.Issuer), zap.String("url", u), zap.Error(err))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("oidc %s: %w", cfg.Issuer, err)
	}
	return &OIDCVerifier{
		issuer: cfg.Issuer,
		claim:  cfg.PrincipalClaim,
		prefix: OIDCPrincipalPrefix + cfg.Issuer + "|",
		keys:   keys,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(clockLeeway),
			jwt.WithTimeFunc(now),
		),
	}, nil
}

var errOtherIssuer = errors.New("issued by another issuer")

// VerifyScoped implements ScopedVerifier.
func (v *OIDCVerifier) VerifyScoped(token string) (Identity, error) {
	if strings.Count(token, ".") != 2 {
		return Identity{}, ErrInvalidToken
	}
	claims := jwt.MapClaims{}
	ctx, cancel := context.WithTimeout(context.Background(), jwksWait)
	defer cancel()
	keyf := v.keys.KeyfuncCtx(ctx)
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		// The claims are decoded (not yet trusted) before the key is looked up: a token of
		// another issuer must not make this one's JWKS be fetched for its unknown kid.
		if iss, _ := claims["iss"].(string); iss != v.issuer {
			return nil, errOtherIssuer
		}
		return keyf(t)
	})
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	user, _ := claims[v.claim].(string)
	if user == "" {
		return Identity{}, fmt.Errorf("%w: claim %s is missing or not a string", ErrInvalidToken, v.claim)
	}
	id := Identity{Principal: v.prefix + user, Scopes: tokenScopes(claims)}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		id.Expires = exp.Time
	}
	return id, nil
}

// Verify implements TokenVerifier.
func (v *OIDCVerifier) Verify(token string) (string, error) {
	id, err := v.VerifyScoped(token)
	return id.Principal, err
}

// tokenScopes reads `scope` (a space-separated string, RFC 8693 §4.2) or, failing that, `scp`
// (an array or a string, as some providers send).
func tokenScopes(claims jwt.MapClaims) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch scp := claims["scp"].(type) {
	case string:
		return strings.Fields(scp)
	case []any:
		out := make([]string, 0, len(scp))
		for _, s := range scp {
			if s, ok := s.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// limitBody caps the response bodies of a transport: a JWKS is a few kilobytes, and one that
// is not should not fill memory.
type limitBody struct {
	base http.RoundTripper
	max  int64
}

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	base := l.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, l.max), resp.Body}
	return resp, nil
}
