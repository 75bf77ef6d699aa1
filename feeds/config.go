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
	DefaultStartWait    = 5 * time.Second

	DefaultPushMinBackoff      = 250 * time.Millisecond
	DefaultPushMaxBackoff      = 30 * time.Second
	DefaultPushPingInterval    = 15 * time.Second
	DefaultPushMaxMessageBytes = 1 << 20
	DefaultPushQueue           = 256
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
	// StartWait bounds how long the first subscription of an idle feed waits, before its
	// eth_subscribe is answered, for the feed's first read of the chain's head (so that it
	// gets only the blocks after it, as with geth). Past it, the subscription is answered and
	// starts after the head the upstream pool last polled. Default 5s.
	StartWait time.Duration `yaml:"startWait"`
	// Push is the feed's use of the nodes' WebSockets (upstreams.chains[].wsUrls).
	Push PushConfig `yaml:"push"`
}

// PushConfig is `feeds.push`: heads pushed by the nodes (eth_subscribe newHeads over a
// chain's upstreams.chains[].wsUrls) instead of polling.
type PushConfig struct {
	// Disabled: the feeds poll even for chains with wsUrls.
	Disabled bool `yaml:"disabled"`
	// MinBackoff and MaxBackoff bound the wait before a reconnection (doubled after each
	// failure in a row, with jitter; reset once a socket has been up for MaxBackoff).
	// Defaults 250ms and 30s.
	MinBackoff time.Duration `yaml:"minBackoff"`
	MaxBackoff time.Duration `yaml:"maxBackoff"`
	// PingInterval: a WebSocket ping is sent this often; a socket with no message or pong
	// for two intervals is dropped. Default 15s.
	PingInterval time.Duration `yaml:"pingInterval"`
	// MaxMessageBytes is the largest message read from a node's socket (a head is ~1 KiB).
	// Default 1 MiB.
	MaxMessageBytes int `yaml:"maxMessageBytes"`
	// Queue is how many pushed heads wait for the feed; beyond it the oldest are dropped
	// (the feed reads the blocks in between, nothing is lost). Default 256.
	Queue int `yaml:"queue"`
}

// SetDefaults fills unset (zero) fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.PollInterval, DefaultPollInterval)
	defaults.Set(&c.History, DefaultHistory)
	defaults.Set(&c.MaxCatchUp, DefaultMaxCatchUp)
	defaults.Set(&c.StartWait, DefaultStartWait)
	defaults.Set(&c.Push.MinBackoff, DefaultPushMinBackoff)
	defaults.Set(&c.Push.MaxBackoff, DefaultPushMaxBackoff)
	defaults.Set(&c.Push.PingInterval, DefaultPushPingInterval)
	defaults.Set(&c.Push.MaxMessageBytes, DefaultPushMaxMessageBytes)
	defaults.Set(&c.Push.Queue, DefaultPushQueue)
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
	if c.StartWait < 0 || c.StartWait > time.Minute {
		add("startWait: must be at most 1m")
	}
	if c.Push.MinBackoff < time.Millisecond || c.Push.MinBackoff > c.Push.MaxBackoff {
		add("push.minBackoff: must be at least 1ms and at most push.maxBackoff")
	}
	if c.Push.MaxBackoff > time.Hour {
		add("push.maxBackoff: must be at most 1h")
	}
	if c.Push.PingInterval < 100*time.Millisecond || c.Push.PingInterval > 10*time.Minute {
		add("push.pingInterval: must be between 100ms and 10m")
	}
	if c.Push.MaxMessageBytes < 4096 || c.Push.MaxMessageBytes > 64<<20 {
		add("push.maxMessageBytes: must be between 4096 and 67108864")
	}
	if c.Push.Queue < 1 || c.Push.Queue > 100_000 {
		add("push.queue: must be between 1 and 100000")
	}
	return errors.Join(errs...)
}
