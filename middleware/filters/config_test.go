package filters

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c != (Config{TTL: 5 * time.Minute, MaxPerClient: 100, MaxLogs: 10000, MaxBlocks: 2048}) {
		t.Fatalf("defaults = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ttl too short", func(c *Config) { c.TTL = 500 * time.Millisecond }, "ttl: must be between 1s and 24h0m0s"},
		{"ttl too long", func(c *Config) { c.TTL = 25 * time.Hour }, "ttl: must be between 1s and 24h0m0s"},
		{"negative maxPerClient", func(c *Config) { c.MaxPerClient = -1 }, "maxPerClient: must be at least 1"},
		{"negative maxLogs", func(c *Config) { c.MaxLogs = -1 }, "maxLogs: must be between 1 and 10000000"},
		{"huge maxBlocks", func(c *Config) { c.MaxBlocks = 2_000_000 }, "maxBlocks: must be between 1 and 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			c.SetDefaults()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
