package auth

import (
	"strings"
	"testing"
	"time"
)

func TestOAuthConfigDefaults(t *testing.T) {
	c := OAuthConfig{OIDC: []OIDCConfig{{Issuer: "https://idp.example.com/", JWKSURL: "https://idp.example.com/jwks", Audience: "api"}}}
	c.SetDefaults()
	if c.Issuer != "web3gate" || c.Audience != "web3gate" || c.TokenTTL != time.Hour ||
		c.SigningKeyFile != "jwt-signing-key.pem" || c.OIDC[0].PrincipalClaim != "sub" {
		t.Fatalf("defaults = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func validOAuthConfig() OAuthConfig {
	c := OAuthConfig{OIDC: []OIDCConfig{{Issuer: "https://idp.example.com/", JWKSURL: "https://idp.example.com/jwks", Audience: "api"}}}
	c.SetDefaults()
	return c
}

func TestOAuthConfigValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*OAuthConfig)
	}{
		{"as is", func(*OAuthConfig) {}},
		{"loopback http JWKS", func(c *OAuthConfig) { c.OIDC[0].JWKSURL = "http://127.0.0.1:8080/jwks" }},
		{"localhost http JWKS", func(c *OAuthConfig) { c.OIDC[0].JWKSURL = "http://localhost:8080/jwks" }},
		{"max TTL", func(c *OAuthConfig) { c.TokenTTL = 24 * time.Hour }},
		{"min TTL", func(c *OAuthConfig) { c.TokenTTL = time.Minute }},
		{"no OIDC", func(c *OAuthConfig) { c.OIDC = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validOAuthConfig()
			tc.edit(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
		})
	}
}

func TestOAuthConfigInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*OAuthConfig)
		want string
	}{
		{"TTL over 24h", func(c *OAuthConfig) { c.TokenTTL = 25 * time.Hour }, "oauth.tokenTtl: must be between 1m0s and 24h0m0s, got 25h0m0s"},
		{"TTL too short", func(c *OAuthConfig) { c.TokenTTL = time.Second }, "oauth.tokenTtl: must be between"},
		{"negative TTL", func(c *OAuthConfig) { c.TokenTTL = -time.Hour }, "oauth.tokenTtl: must be between"},
		{"blank issuer", func(c *OAuthConfig) { c.Issuer = " " }, "oauth.issuer: must not be empty"},
		{"blank audience", func(c *OAuthConfig) { c.Audience = " " }, "oauth.audience: must not be empty"},
		{"blank key file", func(c *OAuthConfig) { c.SigningKeyFile = " " }, "oauth.signingKeyFile: must not be empty"},
		{"OIDC no issuer", func(c *OAuthConfig) { c.OIDC[0].Issuer = "" }, "oauth.oidc[0].issuer: must not be empty"},
		{"OIDC issuer with |", func(c *OAuthConfig) { c.OIDC[0].Issuer = "https://a|b" }, `oauth.oidc[0].issuer: must not contain "|"`},
		{"OIDC issuer is ours", func(c *OAuthConfig) { c.OIDC[0].Issuer = "web3gate" }, "oauth.oidc[0].issuer: \"web3gate\" is web3gate's own issuer"},
		{"OIDC duplicate issuer", func(c *OAuthConfig) { c.OIDC = append(c.OIDC, c.OIDC[0]) }, "oauth.oidc[1].issuer: duplicate of oidc[0]"},
		{"OIDC plain http JWKS", func(c *OAuthConfig) { c.OIDC[0].JWKSURL = "http://idp.example.com/jwks" }, "oauth.oidc[0].jwksUrl: \"http://idp.example.com/jwks\": must be https"},
		{"OIDC relative JWKS", func(c *OAuthConfig) { c.OIDC[0].JWKSURL = "/jwks" }, "oauth.oidc[0].jwksUrl: \"/jwks\" is not an absolute URL"},
		{"OIDC file JWKS", func(c *OAuthConfig) { c.OIDC[0].JWKSURL = "file://host/etc/jwks" }, "oauth.oidc[0].jwksUrl: \"file://host/etc/jwks\": must be https"},
		{"OIDC no audience", func(c *OAuthConfig) { c.OIDC[0].Audience = "" }, "oauth.oidc[0].audience: must not be empty"},
		{"OIDC blank claim", func(c *OAuthConfig) { c.OIDC[0].PrincipalClaim = " " }, "oauth.oidc[0].principalClaim: must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validOAuthConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
