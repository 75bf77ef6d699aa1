package feeds

import (
	"errors"
	"fmt"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// The defaults of the section, as documented in config.yaml.
const (
	DefaultPollInterval = 250 * time.Millisecond
	DefaultHistory      = 256
	DefaultMaxCatchUp   = 1024
)

// Limits of the section.
const (
	// MaxHistory is the largest history accepted.
	MaxHistory = 100_000
	// MaxMaxCatchUp is the largest maxCatchUp accepted.
	MaxMaxCatchUp = 1_000_000
)

// Config is the `feeds:` section: the live feed of each chain that WebSocket subscriptions
// and HTTP filters share.
type Config struct {
	// PollInterval is how often a feed asks its chain for the latest block while it has
	// consumers; a higher pool head (upstreams' own head polling) wakes it at once.
	// Default 250ms.
	PollInterval time.Duration `yaml:"pollInterval"`
	// History is how many recent blocks a feed keeps (hash, parent, header, logs) to detect
	// reorgs and answer filter polls without asking the chain. Default 256.
	History int `yaml:"history"`
	// MaxCatchUp: a gap between the last delivered block and the chain's head longer than
	// this is not replayed block by block; the feed logs a warning and resumes at the head.
	// Default 1024.
	MaxCatchUp int `yaml:"maxCatchUp"`
}

// SetDefaults fills unset (zero) fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.PollInterval, DefaultPollInterval)
	defaults.Set(&c.History, DefaultHistory)
	defaults.Set(&c.MaxCatchUp, DefaultMaxCatchUp)
}

// Validate checks c (after SetDefaults). The errors are joined; each message starts with the
// key path relative to the section.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Hour {
		add("pollInterval: must be between 10ms and 1h")
	}
	if c.History < 2 || c.History > MaxHistory {
		add("history: must be between 2 and %d", MaxHistory)
	}
	if c.MaxCatchUp < 1 || c.MaxCatchUp > MaxMaxCatchUp {
		add("maxCatchUp: must be between 1 and %d", MaxMaxCatchUp)
	}
	return errors.Join(errs...)
}
