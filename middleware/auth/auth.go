// Package auth is the authentication stage: the client id (the X-API-Key header, or the URL's
// last path segment or apiKey query parameter) and the bearer access token of each JSON-RPC
// request, verified once per HTTP request.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Config is the `auth:` section.
type Config struct {
	Clients                []ClientConfig `yaml:"clients"`
	Tokens                 []TokenConfig  `yaml:"tokens"`
	AllowReadsWithClientID bool           `yaml:"allowReadsWithClientId"`
	OAuth                  OAuthConfig    `yaml:"oauth"`
}

// ClientConfig is one accepted client id.
type ClientConfig struct {
	ID string `yaml:"id"`
}

// TokenConfig is one static bearer token, stored as the hex SHA-256 of the token.
type TokenConfig struct {
	SHA256    string `yaml:"sha256"`
	Principal string `yaml:"principal"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() { c.OAuth.SetDefaults() }

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Clients) == 0 {
		errs = append(errs, errors.New("clients: at least one client id is required"))
	}
	seen := map[string]int{}
	for i, cl := range c.Clients {
		switch {
		case strings.TrimSpace(cl.ID) == "":
			errs = append(errs, fmt.Errorf("clients[%d].id: must not be empty", i))
		case len(cl.ID) > 256:
			errs = append(errs, fmt.Errorf("clients[%d].id: longer than 256 characters", i))
		}
		if j, dup := seen[cl.ID]; dup {
			errs = append(errs, fmt.Errorf("clients[%d].id: duplicate of clients[%d]", i, j))
		}
		seen[cl.ID] = i
	}
	hashes := map[string]int{}
	for i, t := range c.Tokens {
		h := strings.ToLower(t.SHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("tokens[%d].sha256: must be 64 hex digits (the SHA-256 of the token)", i))
		}
		if j, dup := hashes[h]; dup {
			errs = append(errs, fmt.Errorf("tokens[%d].sha256: duplicate of tokens[%d]", i, j))
		}
		hashes[h] = i
		if strings.TrimSpace(t.Principal) == "" {
			errs = append(errs, fmt.Errorf("tokens[%d].principal: must not be empty", i))
		} else if err := ValidPrincipal(t.Principal); err != nil {
			errs = append(errs, fmt.Errorf("tokens[%d].principal: %w", i, err))
		}
	}
	errs = append(errs, c.OAuth.problems()...)
	return errors.Join(errs...)
}

// TokenVerifier turns a bearer token into the principal it authenticates. It returns
// ErrInvalidToken for a token it does not accept.
type TokenVerifier interface {
	Verify(token string) (principal string, err error)
}

// ErrInvalidToken is returned by a TokenVerifier for a token it does not accept.
var ErrInvalidToken = errors.New("invalid access token")

// StaticTokens verifies tokens against SHA-256 hashes from the config.
//
// A token it accepted is remembered, in one of recentSlots slots chosen by a hash with a
// seed of the process: the next request with the same token (every request of a client,
// usually) is compared with it in constant time instead of being hashed with SHA-256, which
// costs ~10 % of a locally answered call. Only accepted tokens are remembered, and the
// slot's choice depends on a seed no client knows, so a hit or a miss tells a client nothing
// about a token it does not already hold; the config still holds only hashes.
type StaticTokens struct {
	byHash map[[sha256.Size]byte]string
	seed   maphash.Seed
	recent [recentSlots]atomic.Pointer[recentToken]
}

// recentSlots bounds the tokens remembered; two tokens in one slot take turns.
const recentSlots = 64

type recentToken struct{ token, principal string }

// NewStaticTokens builds the verifier of validated token configs.
func NewStaticTokens(tokens []TokenConfig) (*StaticTokens, error) {
	s := &StaticTokens{byHash: make(map[[sha256.Size]byte]string, len(tokens)), seed: maphash.MakeSeed()}
	for i, t := range tokens {
		var h [sha256.Size]byte
		b, err := hex.DecodeString(t.SHA256)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("auth.tokens[%d].sha256: must be 64 hex digits", i)
		}
		copy(h[:], b)
		s.byHash[h] = t.Principal
	}
	return s, nil
}

// Verify implements TokenVerifier. A token is compared in constant time with the accepted
// token remembered in its slot, or else hashed before the lookup, so the time taken does not
// depend on how much of a stored token it shares.
func (s *StaticTokens) Verify(token string) (string, error) {
	if len(s.byHash) == 0 {
		return "", ErrInvalidToken // no static tokens: spare the hash of every OAuth token
	}
	slot := &s.recent[maphash.String(s.seed, token)%recentSlots]
	if r := slot.Load(); r != nil && subtle.ConstantTimeCompare(stringBytes(r.token), stringBytes(token)) == 1 {
		return r.principal, nil
	}
	h := sha256.Sum256([]byte(token))
	p, ok := s.byHash[h]
	if !ok {
		return "", ErrInvalidToken
	}
	slot.Store(&recentToken{token: strings.Clone(token), principal: p})
	return p, nil
}

// stringBytes is s's bytes without a copy, for reading only.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Deps are the auth stage's collaborators.
type Deps struct {
	Verifier TokenVerifier
}

// Stage is the authentication stage.
type Stage struct {
	clients   map[string]struct{}
	verifier  TokenVerifier
	scoped    ScopedVerifier // verifier, when it reports scopes too
	allowRead bool
}

var _ proxy.Stage = (*Stage)(nil)

// New builds the stage from a validated config.
func New(cfg Config, deps Deps) (*Stage, error) {
	if deps.Verifier == nil {
		return nil, errors.New("auth: a token verifier is required")
	}
	s := &Stage{clients: map[string]struct{}{}, verifier: deps.Verifier, allowRead: cfg.AllowReadsWithClientID}
	s.scoped, _ = deps.Verifier.(ScopedVerifier)
	for _, c := range cfg.Clients {
		s.clients[c.ID] = struct{}{}
	}
	return s, nil
}

// Serve implements proxy.Stage. A missing or unknown client id, a malformed Authorization
// header or a token the verifier refuses answers the whole HTTP request with 4100 (HTTP 401).
// A missing token does too, unless reads with a client id alone are allowed and the method
// does not sign.
func (s *Stage) Serve(c *proxy.Call, next proxy.Handler) (*proxy.Response, error) {
	p, err := c.Exchange.Authenticate(s)
	if err != nil {
		return nil, err
	}
	if !p.Authenticated() && (!s.allowRead || jsonrpc.IsSigningMethod(c.Method())) {
		return nil, jsonrpc.ErrUnauthorized.With("Not Authorized: a bearer access token is required")
	}
	c.Principal = p
	return next.Serve(c)
}

// VerifyExchange implements proxy.Verifier: the client id, then the bearer token. The client
// id comes from the X-API-Key header or the URL (proxy.Exchange.ClientID); two that differ
// are refused rather than one of them chosen.
func (s *Stage) VerifyExchange(ex *proxy.Exchange, p *proxy.Principal) error {
	if ex.ClientIDConflict {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: the request carries different client ids (X-API-Key header, URL path segment, apiKey query parameter)")
	}
	if ex.ClientID == "" {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: a client id is required: the X-API-Key header, the URL's last path segment (/v1/web3/mainnet/{clientId}) or its apiKey query parameter")
	}
	if !s.knownClient(ex.ClientID) {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: unknown client id")
	}
	if ex.BadAuthHeader {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: the Authorization header must be \"Bearer <token>\"")
	}
	p.ClientID = ex.ClientID
	if ex.Bearer == "" {
		if !s.allowRead {
			return jsonrpc.ErrUnauthorized.With("Not Authorized: a bearer access token is required")
		}
		return nil
	}
	if s.scoped != nil {
		id, err := s.scoped.VerifyScoped(ex.Bearer)
		if err != nil {
			return jsonrpc.ErrUnauthorized.With("Not Authorized: invalid access token")
		}
		p.ID, p.Scopes, p.Expires = id.Principal, id.Scopes, id.Expires
		return nil
	}
	id, err := s.verifier.Verify(ex.Bearer)
	if err != nil {
		return jsonrpc.ErrUnauthorized.With("Not Authorized: invalid access token")
	}
	p.ID = id
	return nil
}

// knownClient reports whether id is a configured client id. Client ids identify the
// application (like OAuth's client_id) and grant no signing: the bearer token does, and only
// the token's hash is ever compared. A client id in a wallet's URL still works as an API
// key for reads, so it is never logged.
func (s *Stage) knownClient(id string) bool {
	_, ok := s.clients[id]
	return ok
}
