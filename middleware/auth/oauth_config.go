package auth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
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
}

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
