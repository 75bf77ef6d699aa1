package filters

import (
	"errors"
	"fmt"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// The defaults of the section, as documented in config.yaml.
const (
	DefaultTTL          = 5 * time.Minute
	DefaultMaxPerClient = 100
	DefaultMaxLogs      = 10_000
	DefaultMaxBlocks    = 2048
)

// Bounds of the section.
const (
	minTTL       = time.Second
	maxTTL       = 24 * time.Hour
	maxMaxLogs   = 10_000_000
	maxMaxBlocks = 1_000_000
)

// Config is the `filters:` section: the HTTP filters (eth_newFilter, eth_newBlockFilter,
// eth_getFilterChanges, ...) web3gate answers itself.
type Config struct {
	// TTL: a filter not polled (eth_getFilterChanges) for this long is gone ("filter not
	// found"), as geth's filters time out. Default 5m.
	TTL time.Duration `yaml:"ttl"`
	// MaxPerClient is how many live filters one owner (the principal of the bearer token,
	// else the client id) may hold on all chains together. Default 100.
	MaxPerClient int `yaml:"maxPerClient"`
	// MaxLogs is how many logs one eth_getFilterChanges may return; a poll that would return
	// more drops the filter. Default 10000.
	MaxLogs int `yaml:"maxLogs"`
	// MaxBlocks is how many new blocks one eth_getFilterChanges may span; a poll after more
	// drops the filter. Default 2048.
	MaxBlocks int `yaml:"maxBlocks"`
}

// SetDefaults fills unset (zero) fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.TTL, DefaultTTL)
	defaults.Set(&c.MaxPerClient, DefaultMaxPerClient)
	defaults.Set(&c.MaxLogs, DefaultMaxLogs)
	defaults.Set(&c.MaxBlocks, DefaultMaxBlocks)
}

// Validate checks c (after SetDefaults); each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.TTL < minTTL || c.TTL > maxTTL {
		add("ttl: must be between %s and %s, got %s", minTTL, maxTTL, c.TTL)
	}
	if c.MaxPerClient < 1 {
		add("maxPerClient: must be at least 1, got %d", c.MaxPerClient)
	}
	if c.MaxLogs < 1 || c.MaxLogs > maxMaxLogs {
		add("maxLogs: must be between 1 and %d, got %d", maxMaxLogs, c.MaxLogs)
	}
	if c.MaxBlocks < 1 || c.MaxBlocks > maxMaxBlocks {
		add("maxBlocks: must be between 1 and %d, got %d", maxMaxBlocks, c.MaxBlocks)
	}
	return errors.Join(errs...)
}
