package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
)

// accessTokenType is the typ header of web3gate's access tokens (RFC 9068 §2.1). The
// verifier requires it, so no other kind of JWT signed with the key would pass as one.
const accessTokenType = "at+jwt"

// clockLeeway is the clock skew tolerated on exp, nbf and iat, between replicas and between
// an identity provider and web3gate.
const clockLeeway = 30 * time.Second

// accessClaims are the claims of web3gate's access tokens: iss, sub (the principal), aud, iat,
// exp, jti, plus scope (space-separated, RFC 8693 §4.2) and client_id (RFC 9068 §2.2).
type accessClaims struct {
	jwt.RegisteredClaims
	Scope    string `json:"scope,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

// Issuer signs web3gate's access tokens.
type Issuer struct {
	key      *SigningKey
	issuer   string
	audience string
	ttl      time.Duration
	now      func() time.Time
}

// NewIssuer builds the issuer of a validated config. now is the clock (nil: time.Now).
func NewIssuer(cfg OAuthConfig, key *SigningKey, now func() time.Time) (*Issuer, error) {
	if key == nil {
		return nil, errors.New("issuer: a signing key is required")
	}
	if now == nil {
		now = time.Now
	}
	return &Issuer{key: key, issuer: cfg.Issuer, audience: cfg.Audience, ttl: cfg.TokenTTL, now: now}, nil
}

// TTL is how long the tokens are valid.
func (i *Issuer) TTL() time.Duration { return i.ttl }

// Issue signs an access token for principal, obtained by clientID, with scopes. It returns
// the token and its id (jti), which may be logged; the token may not.
func (i *Issuer) Issue(principal, clientID string, scopes []string) (token, jti string, err error) {
	if err := ValidPrincipal(principal); err != nil {
		return "", "", fmt.Errorf("issue token: %w", err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", "", fmt.Errorf("issue token: %w", err)
	}
	jti = base64.RawURLEncoding.EncodeToString(id[:])
	now := i.now().Truncate(time.Second)
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, accessClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.issuer,
			Subject:   principal,
			Audience:  jwt.ClaimStrings{i.audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(i.ttl)),
			ID:        jti,
		},
		Scope:    strings.Join(scopes, " "),
		ClientID: clientID,
	})
	t.Header["kid"] = i.key.kid
	t.Header["typ"] = accessTokenType
	token, err = t.SignedString(i.key.priv)
	if err != nil {
		return "", "", fmt.Errorf("issue token: %w", err)
	}
	return token, jti, nil
}

// JWTVerifier accepts web3gate's own access tokens: EdDSA signatures by the signing key only
// (alg none, HS* and RS* are refused before any key is looked up, so the public key can never
// be used as an HMAC secret), typ at+jwt, the key's kid, the configured iss and aud, exp
// required, nbf and iat honoured, each with 30 s of leeway. With a client store, a token is
// accepted only while the client it was issued to (its client_id claim) is stored and not
// disabled, as read from the store at most RevocationCheckInterval ago.
type JWTVerifier struct {
	pub    ed25519.PublicKey
	kid    string
	parser *jwt.Parser
	now    func() time.Time
	states *clientStates // nil: no client store, no revocation check

	// verified caches tokens already verified, by their SHA-256, until they expire: an
	// Ed25519 verification costs tens of microseconds, a lookup well under one
	// (docs/performance.md, "Notes from the code", middleware/auth).
	mu       sync.RWMutex
	verified map[[sha256.Size]byte]verifiedToken
}

// verifiedToken is a verified token's identity (whose Expires is the token's exp) and client.
type verifiedToken struct {
	id       Identity
	clientID string
}

// maxVerified bounds the cache of verified tokens; a full cache drops its expired entries,
// and is emptied when none have expired.
const maxVerified = 1 << 16

// JWTVerifierDeps are the verifier's collaborators.
type JWTVerifierDeps struct {
	Key *SigningKey
	// Clients is read for the state of the client each token was issued to, so that the
	// tokens of a disabled client stop verifying. nil: no such check, and tokens without a
	// client_id pass (a verifier of tokens only, as in tests).
	Clients ClientStore
	Logger  *zap.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// NewJWTVerifier builds the verifier of a validated, defaulted config.
func NewJWTVerifier(cfg OAuthConfig, deps JWTVerifierDeps) (*JWTVerifier, error) {
	if deps.Key == nil {
		return nil, errors.New("jwt verifier: a signing key is required")
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	v := &JWTVerifier{
		pub:      deps.Key.pub,
		kid:      deps.Key.kid,
		now:      now,
		verified: make(map[[sha256.Size]byte]verifiedToken),
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(clockLeeway),
			jwt.WithTimeFunc(now),
			jwt.WithStrictDecoding(),
		),
	}
	if deps.Clients != nil {
		if cfg.RevocationCheckInterval <= 0 {
			return nil, errors.New("jwt verifier: revocationCheckInterval must be positive")
		}
		log := deps.Logger
		if log == nil {
			log = zap.NewNop()
		}
		v.states = newClientStates(deps.Clients, cfg.RevocationCheckInterval, log)
	}
	return v, nil
}

var errNotOurKey = errors.New("not signed by web3gate's key")

func (v *JWTVerifier) keyfunc(t *jwt.Token) (any, error) {
	if kid, _ := t.Header["kid"].(string); kid != v.kid {
		return nil, errNotOurKey
	}
	if typ, _ := t.Header["typ"].(string); typ != accessTokenType {
		return nil, fmt.Errorf("typ is not %s", accessTokenType)
	}
	return v.pub, nil
}

// VerifyScoped implements ScopedVerifier.
func (v *JWTVerifier) VerifyScoped(token string) (Identity, error) {
	if strings.Count(token, ".") != 2 {
		return Identity{}, ErrInvalidToken // not a JWS compact token: skip the parser
	}
	h := sha256.Sum256([]byte(token))
	now := v.now()
	v.mu.RLock()
	e, ok := v.verified[h]
	v.mu.RUnlock()
	if ok && now.Before(e.id.Expires) {
		if err := v.clientEnabled(e.clientID, now); err != nil {
			return Identity{}, err
		}
		return e.id, nil
	}
	var c accessClaims
	if _, err := v.parser.ParseWithClaims(token, &c, v.keyfunc); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if ValidPrincipal(c.Subject) != nil {
		return Identity{}, fmt.Errorf("%w: sub is not a principal", ErrInvalidToken)
	}
	if v.states != nil && c.ClientID == "" {
		return Identity{}, fmt.Errorf("%w: no client_id", ErrInvalidToken)
	}
	id := Identity{Principal: c.Subject, Scopes: strings.Fields(c.Scope), Expires: c.ExpiresAt.Time}
	v.remember(h, verifiedToken{id: id, clientID: c.ClientID}, now)
	if err := v.clientEnabled(c.ClientID, now); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// clientEnabled is nil when the token's client may use it: always without a client store.
func (v *JWTVerifier) clientEnabled(clientID string, now time.Time) error {
	if v.states == nil {
		return nil
	}
	if err := v.states.check(clientID, now); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return nil
}

// remember caches a verified token until its exp (without the parser's leeway).
func (v *JWTVerifier) remember(h [sha256.Size]byte, e verifiedToken, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.verified) >= maxVerified {
		for k, old := range v.verified {
			if !now.Before(old.id.Expires) {
				delete(v.verified, k)
			}
		}
		if len(v.verified) >= maxVerified {
			clear(v.verified)
		}
	}
	v.verified[h] = e
}

// Verify implements TokenVerifier.
func (v *JWTVerifier) Verify(token string) (string, error) {
	id, err := v.VerifyScoped(token)
	return id.Principal, err
}
