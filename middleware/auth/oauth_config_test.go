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
	if c.MaxConcurrentHashes != 0 || c.MaxQueuedHashes != 64 || c.HashQueueTimeout != 2*time.Second ||
		c.RevocationCheckInterval != 10*time.Second || len(c.Admin.Tokens) != 0 {
		t.Fatalf("defaults = %+v", c)
	}
	if want := (ThrottleConfig{Window: time.Minute, MaxFailuresPerClient: 5, MaxFailuresPerAddress: 20,
		Lockout: 30 * time.Second, MaxLockout: 15 * time.Minute, MaxEntries: 10000}); c.Throttle != want {
		t.Fatalf("throttle defaults = %+v, want %+v", c.Throttle, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	// Admin tokens without a name are named by their position.
	c.Admin.Tokens = []AdminToken{{SHA256: hash("a")}, {Name: "ops", SHA256: hash("b")}}
	c.SetDefaults()
	if c.Admin.Tokens[0].Name != "tokens[0]" || c.Admin.Tokens[1].Name != "ops" {
		t.Fatalf("admin token names = %+v", c.Admin.Tokens)
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
		{"throttles off", func(c *OAuthConfig) { c.Throttle.MaxFailuresPerClient, c.Throttle.MaxFailuresPerAddress = -1, -1 }},
		{"one failure", func(c *OAuthConfig) { c.Throttle.MaxFailuresPerClient = 1 }},
		{"lockout equals maxLockout", func(c *OAuthConfig) { c.Throttle.Lockout, c.Throttle.MaxLockout = time.Minute, time.Minute }},
		{"admin token", func(c *OAuthConfig) { c.Admin.Tokens = []AdminToken{{Name: "ops", SHA256: hash("x")}} }},
		{"revocation check as long as the TTL", func(c *OAuthConfig) { c.RevocationCheckInterval = c.TokenTTL }},
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
		{"negative maxConcurrentHashes", func(c *OAuthConfig) { c.MaxConcurrentHashes = -1 }, "oauth.maxConcurrentHashes: must be between 0 (2 × GOMAXPROCS) and 1024, got -1"},
		{"maxQueuedHashes too large", func(c *OAuthConfig) { c.MaxQueuedHashes = 1 << 20 }, "oauth.maxQueuedHashes: must be between 1 and 65536"},
		{"hashQueueTimeout too short", func(c *OAuthConfig) { c.HashQueueTimeout = time.Millisecond }, "oauth.hashQueueTimeout: must be between 10ms and 1m"},
		{"throttle window too short", func(c *OAuthConfig) { c.Throttle.Window = time.Millisecond }, "oauth.throttle.window: must be between 1s and 24h"},
		{"maxFailuresPerClient -2", func(c *OAuthConfig) { c.Throttle.MaxFailuresPerClient = -2 }, "oauth.throttle.maxFailuresPerClient: must be -1 (off) or between 1 and 1048576, got -2"},
		{"maxFailuresPerAddress 0 without defaults", func(c *OAuthConfig) { c.Throttle.MaxFailuresPerAddress = 0 }, "oauth.throttle.maxFailuresPerAddress: must be -1 (off)"},
		{"lockout too short", func(c *OAuthConfig) { c.Throttle.Lockout = time.Millisecond }, "oauth.throttle.lockout: must be between 1s and 24h"},
		{"maxLockout below lockout", func(c *OAuthConfig) { c.Throttle.MaxLockout = time.Second }, "oauth.throttle.maxLockout: must be between throttle.lockout (30s) and 168h"},
		{"maxEntries too small", func(c *OAuthConfig) { c.Throttle.MaxEntries = 1 }, "oauth.throttle.maxEntries: must be between 16 and 16777216"},
		{"revocation check too short", func(c *OAuthConfig) { c.RevocationCheckInterval = time.Millisecond }, "oauth.revocationCheckInterval: must be between 100ms and tokenTtl (1h0m0s)"},
		{"revocation check beyond the TTL", func(c *OAuthConfig) { c.RevocationCheckInterval = 2 * time.Hour }, "oauth.revocationCheckInterval: must be between 100ms and tokenTtl"},
		{"admin token not hex", func(c *OAuthConfig) { c.Admin.Tokens = []AdminToken{{Name: "a", SHA256: "xyz"}} }, "oauth.admin.tokens[0].sha256: must be 64 hex digits"},
		{"admin token duplicate", func(c *OAuthConfig) {
			c.Admin.Tokens = []AdminToken{{Name: "a", SHA256: hash("x")}, {Name: "b", SHA256: strings.ToUpper(hash("x"))}}
		}, "oauth.admin.tokens[1].sha256: duplicate of admin.tokens[0]"},
		{"admin token name duplicate", func(c *OAuthConfig) {
			c.Admin.Tokens = []AdminToken{{Name: "a", SHA256: hash("x")}, {Name: "a", SHA256: hash("y")}}
		}, "oauth.admin.tokens[1].name: duplicate of admin.tokens[0]"},
		{"admin token name with a newline", func(c *OAuthConfig) { c.Admin.Tokens = []AdminToken{{Name: "a\nb", SHA256: hash("x")}} }, "oauth.admin.tokens[0].name: must be 1 to 64 characters"},
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
