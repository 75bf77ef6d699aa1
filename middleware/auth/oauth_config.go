package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/proxy"
)

// OAuthConfig is the `auth.oauth:` section: the access tokens web3gate issues at
// POST /v1/oauth2/token and the external identity providers whose tokens it accepts.
type OAuthConfig struct {
	// Issuer is the iss claim of the tokens web3gate issues.
	Issuer string `yaml:"issuer"`
	// Audience is their aud claim; tokens for another audience are refused.
	Audience string `yaml:"audience"`
	// TokenTTL is how long an issued token is valid (default 1h, at most 24h).
	TokenTTL time.Duration `yaml:"tokenTtl"`
	// SigningKeyFile is the PEM (PKCS#8) Ed25519 private key that signs the tokens. It is
	// created, mode 0600, when missing. Replicas share the file, so each verifies the others'
	// tokens.
	SigningKeyFile string `yaml:"signingKeyFile"`
	// OIDC are external identity providers whose tokens identify end users.
	OIDC []OIDCConfig `yaml:"oidc"`

	// MaxConcurrentHashes bounds the argon2id verifications of client secrets running at once
	// (each holds 19 MiB for tens of milliseconds); 0 is 2 × GOMAXPROCS.
	MaxConcurrentHashes int `yaml:"maxConcurrentHashes"`
	// MaxQueuedHashes bounds the token requests waiting for a verification slot (default
	// 64); one more is refused at once with 503 and Retry-After.
	MaxQueuedHashes int `yaml:"maxQueuedHashes"`
	// HashQueueTimeout is how long a token request waits for a slot before it is refused
	// with 503 (default 2s).
	HashQueueTimeout time.Duration `yaml:"hashQueueTimeout"`
	// Throttle locks out client ids and source addresses that keep failing to authenticate.
	Throttle ThrottleConfig `yaml:"throttle"`
	// RevocationCheckInterval is how often a verifier re-reads the state of the client a
	// token was issued to (default 10s): a disabled client's tokens are refused at most this
	// long (plus one store read) after `web3gate clients disable`.
	RevocationCheckInterval time.Duration `yaml:"revocationCheckInterval"`
	// Admin is the OAuth client admin API on the admin listener.
	Admin ClientsAdminConfig `yaml:"admin"`
}

// ThrottleConfig is `auth.oauth.throttle`. A key (a client id, or a source address: the TCP
// peer, an IPv6 peer by its /64) may have at most its maximum of failed authentications
// within Window, counting the attempts still being checked as failures; the attempt that
// reaches the maximum locks the key for Lockout, each further lock of the key twice as long
// as the one before, up to MaxLockout. A locked key, or one with its maximum in flight, is
// refused with 429 before any store read or hash.
type ThrottleConfig struct {
	// Window is the period failures are counted in (default 1m).
	Window time.Duration `yaml:"window"`
	// MaxFailuresPerClient applies to each stored client id (default 5; -1: off).
	MaxFailuresPerClient int `yaml:"maxFailuresPerClient"`
	// MaxFailuresPerAddress applies to each source address (default 20; -1: off, e.g. behind
	// a proxy or load balancer, where every request comes from its address).
	MaxFailuresPerAddress int `yaml:"maxFailuresPerAddress"`
	// Lockout is the first lock of a key (default 30s); MaxLockout the longest (default 15m).
	// A key's locks start again from Lockout after MaxLockout without a failure.
	Lockout    time.Duration `yaml:"lockout"`
	MaxLockout time.Duration `yaml:"maxLockout"`
	// MaxEntries bounds each of the two tables (client ids, addresses); when one is full the
	// key seen least recently is dropped (default 10000).
	MaxEntries int `yaml:"maxEntries"`
}

// ClientsAdminConfig is `auth.oauth.admin`.
type ClientsAdminConfig struct {
	// Tokens are the bearer tokens the client admin API accepts. None: the API answers 403.
	Tokens []AdminToken `yaml:"tokens"`
}

// AdminToken is one admin token, stored as the hex SHA-256 of the token, with a name the
// logs of its writes carry.
type AdminToken = proxy.AdminToken

// OIDCConfig is one external OpenID Connect issuer.
type OIDCConfig struct {
	// Issuer is the exact iss claim of its tokens, e.g. "https://accounts.example.com/".
	Issuer string `yaml:"issuer"`
	// JWKSURL is where its signing keys are published (https; http only on loopback).
	JWKSURL string `yaml:"jwksUrl"`
	// Audience is the aud its tokens must carry for web3gate.
	Audience string `yaml:"audience"`
	// PrincipalClaim is the claim that names the user (default "sub"). The principal is
	// "oidc:<issuer>|<claim value>".
	PrincipalClaim string `yaml:"principalClaim"`
}

// Defaults and bounds of OAuthConfig.
const (
	DefaultIssuer         = "web3gate"
	DefaultAudience       = "web3gate"
	DefaultTokenTTL       = time.Hour
	MaxTokenTTL           = 24 * time.Hour
	MinTokenTTL           = time.Minute
	DefaultSigningKeyFile = "jwt-signing-key.pem"
	DefaultPrincipalClaim = "sub"

	DefaultMaxQueuedHashes         = 64
	DefaultHashQueueTimeout        = 2 * time.Second
	DefaultThrottleWindow          = time.Minute
	DefaultMaxFailuresPerClient    = 5
	DefaultMaxFailuresPerAddress   = 20
	DefaultLockout                 = 30 * time.Second
	DefaultMaxLockout              = 15 * time.Minute
	DefaultThrottleMaxEntries      = 10000
	DefaultRevocationCheckInterval = 10 * time.Second
)

// SetDefaults fills unset fields with their defaults.
func (c *OAuthConfig) SetDefaults() {
	defaults.Set(&c.Issuer, DefaultIssuer)
	defaults.Set(&c.Audience, DefaultAudience)
	defaults.Set(&c.TokenTTL, DefaultTokenTTL)
	defaults.Set(&c.SigningKeyFile, DefaultSigningKeyFile)
	for i := range c.OIDC {
		defaults.Set(&c.OIDC[i].PrincipalClaim, DefaultPrincipalClaim)
	}
	defaults.Set(&c.MaxQueuedHashes, DefaultMaxQueuedHashes)
	defaults.Set(&c.HashQueueTimeout, DefaultHashQueueTimeout)
	t := &c.Throttle
	defaults.Set(&t.Window, DefaultThrottleWindow)
	defaults.Set(&t.MaxFailuresPerClient, DefaultMaxFailuresPerClient)
	defaults.Set(&t.MaxFailuresPerAddress, DefaultMaxFailuresPerAddress)
	defaults.Set(&t.Lockout, DefaultLockout)
	defaults.Set(&t.MaxLockout, DefaultMaxLockout)
	defaults.Set(&t.MaxEntries, DefaultThrottleMaxEntries)
	defaults.Set(&c.RevocationCheckInterval, DefaultRevocationCheckInterval)
	for i := range c.Admin.Tokens {
		defaults.Set(&c.Admin.Tokens[i].Name, fmt.Sprintf("tokens[%d]", i))
	}
}

// Validate checks c. Each message names its key from the `oauth` key down
// ("oauth.oidc[0].jwksUrl: ..."), so that the auth section can pass them on as they are.
func (c *OAuthConfig) Validate() error { return errors.Join(c.problems()...) }

// problems are Validate's errors, one per problem, for Config.Validate to list with its own.
func (c *OAuthConfig) problems() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("oauth."+format, args...)) }
	if strings.TrimSpace(c.Issuer) == "" {
		add("issuer: must not be empty")
	}
	if strings.TrimSpace(c.Audience) == "" {
		add("audience: must not be empty")
	}
	if c.TokenTTL < MinTokenTTL || c.TokenTTL > MaxTokenTTL {
		add("tokenTtl: must be between %s and %s, got %s", MinTokenTTL, MaxTokenTTL, c.TokenTTL)
	}
	if strings.TrimSpace(c.SigningKeyFile) == "" {
		add("signingKeyFile: must not be empty")
	}
	issuers := map[string]int{}
	for i, o := range c.OIDC {
		switch {
		case strings.TrimSpace(o.Issuer) == "":
			add("oidc[%d].issuer: must not be empty", i)
		case strings.Contains(o.Issuer, "|"):
			add("oidc[%d].issuer: must not contain \"|\" (it separates issuer and user in the principal)", i)
		case o.Issuer == c.Issuer:
			add("oidc[%d].issuer: %q is web3gate's own issuer (oauth.issuer)", i, o.Issuer)
		}
		if j, dup := issuers[o.Issuer]; dup {
			add("oidc[%d].issuer: duplicate of oidc[%d]", i, j)
		}
		issuers[o.Issuer] = i
		if err := checkJWKSURL(o.JWKSURL); err != nil {
			add("oidc[%d].jwksUrl: %v", i, err)
		}
		if strings.TrimSpace(o.Audience) == "" {
			add("oidc[%d].audience: must not be empty", i)
		}
		if strings.TrimSpace(o.PrincipalClaim) == "" {
			add("oidc[%d].principalClaim: must not be empty", i)
		}
	}
	if c.MaxConcurrentHashes < 0 || c.MaxConcurrentHashes > 1024 {
		add("maxConcurrentHashes: must be between 0 (2 × GOMAXPROCS) and 1024, got %d", c.MaxConcurrentHashes)
	}
	if c.MaxQueuedHashes < 1 || c.MaxQueuedHashes > 1<<16 {
		add("maxQueuedHashes: must be between 1 and 65536, got %d", c.MaxQueuedHashes)
	}
	if c.HashQueueTimeout < 10*time.Millisecond || c.HashQueueTimeout > time.Minute {
		add("hashQueueTimeout: must be between 10ms and 1m, got %s", c.HashQueueTimeout)
	}
	t := c.Throttle
	if t.Window < time.Second || t.Window > 24*time.Hour {
		add("throttle.window: must be between 1s and 24h, got %s", t.Window)
	}
	for _, m := range []struct {
		key string
		n   int
	}{{"maxFailuresPerClient", t.MaxFailuresPerClient}, {"maxFailuresPerAddress", t.MaxFailuresPerAddress}} {
		if m.n == 0 || m.n < -1 || m.n > 1<<20 {
			add("throttle.%s: must be -1 (off) or between 1 and 1048576, got %d", m.key, m.n)
		}
	}
	if t.Lockout < time.Second || t.Lockout > 24*time.Hour {
		add("throttle.lockout: must be between 1s and 24h, got %s", t.Lockout)
	}
	if t.MaxLockout < t.Lockout || t.MaxLockout > 7*24*time.Hour {
		add("throttle.maxLockout: must be between throttle.lockout (%s) and 168h, got %s", t.Lockout, t.MaxLockout)
	}
	if t.MaxEntries < 16 || t.MaxEntries > 1<<24 {
		add("throttle.maxEntries: must be between 16 and 16777216, got %d", t.MaxEntries)
	}
	if c.RevocationCheckInterval < 100*time.Millisecond || c.RevocationCheckInterval > c.TokenTTL {
		add("revocationCheckInterval: must be between 100ms and tokenTtl (%s), got %s", c.TokenTTL, c.RevocationCheckInterval)
	}
	hashes, names := map[string]int{}, map[string]int{}
	for i, tok := range c.Admin.Tokens {
		h := strings.ToLower(tok.SHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			add("admin.tokens[%d].sha256: must be 64 hex digits (the SHA-256 of the token; web3gate auth hash-token makes it)", i)
		} else if j, dup := hashes[h]; dup {
			add("admin.tokens[%d].sha256: duplicate of admin.tokens[%d]", i, j)
		} else {
			hashes[h] = i
		}
		if n := tok.Name; n == "" || len(n) > 64 || strings.ContainsFunc(n, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			add("admin.tokens[%d].name: must be 1 to 64 characters without control characters", i)
		}
		if j, dup := names[tok.Name]; dup {
			add("admin.tokens[%d].name: duplicate of admin.tokens[%d]", i, j)
		} else {
			names[tok.Name] = i
		}
	}
	return errs
}

// checkJWKSURL requires an absolute https URL; plain http only to a loopback address (a local
// identity provider in development), since keys fetched in the clear could be replaced.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("%q: must be https (http only for a loopback host)", raw)
	}
	return fmt.Errorf("%q: must be https", raw)
}
