package products

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/proxy"
)

// Config is the `products:` section.
type Config struct {
	Admin AdminConfig `yaml:"admin"`
}

// AdminConfig is `products.admin`: the admin product API on the admin listener.
type AdminConfig struct {
	// Tokens are the bearer tokens the admin product API accepts. None: the API answers 403.
	Tokens []AdminToken `yaml:"tokens"`
	// MaxBodyBytes bounds a request body; larger ones get 413.
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
}

// AdminToken is one admin token, stored as the hex SHA-256 of the token; its name identifies
// it in the logs of the writes made with it.
type AdminToken = proxy.AdminToken

// DefaultMaxBodyBytes is products.admin.maxBodyBytes when unset (1 MiB).
const DefaultMaxBodyBytes = 1 << 20

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Admin.MaxBodyBytes, DefaultMaxBodyBytes)
	for i := range c.Admin.Tokens {
		defaults.Set(&c.Admin.Tokens[i].Name, fmt.Sprintf("tokens[%d]", i))
	}
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	hashes := map[string]int{}
	names := map[string]int{}
	for i, t := range c.Admin.Tokens {
		h := strings.ToLower(t.SHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("admin.tokens[%d].sha256: must be 64 hex digits (the SHA-256 of the token; web3gate auth hash-token makes it)", i))
		} else if j, dup := hashes[h]; dup {
			errs = append(errs, fmt.Errorf("admin.tokens[%d].sha256: duplicate of admin.tokens[%d]", i, j))
		} else {
			hashes[h] = i
		}
		switch j, dup := names[t.Name]; {
		case strings.TrimSpace(t.Name) == "" || len(t.Name) > 64:
			errs = append(errs, fmt.Errorf("admin.tokens[%d].name: must be 1 to 64 characters", i))
		case dup:
			errs = append(errs, fmt.Errorf("admin.tokens[%d].name: duplicate of admin.tokens[%d]", i, j))
		default:
			names[t.Name] = i
		}
	}
	if c.Admin.MaxBodyBytes < 1024 || c.Admin.MaxBodyBytes > 64<<20 {
		errs = append(errs, errors.New("admin.maxBodyBytes: must be between 1024 and 67108864"))
	}
	return errors.Join(errs...)
}
