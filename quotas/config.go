package quotas

import (
	"errors"
	"fmt"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// The defaults of the section, as documented in config.yaml.
const (
	DefaultFlushInterval = time.Second
	DefaultMaxClients    = 100_000
)

// Bounds of the section.
const (
	minFlushInterval = 10 * time.Millisecond
	maxFlushInterval = time.Hour
	maxMaxClients    = 10_000_000
	maxClientIDLen   = 256
)

// Config is the top-level `quotas:` section: compute units per client id and UTC day or
// month, recorded in the store and enforced by the rate-limit stage.
type Config struct {
	// Enabled records every client id's usage and enforces the quotas of Clients. Default
	// false: nothing is recorded, nothing refused.
	Enabled bool `yaml:"enabled"`
	// FlushInterval is how often the usage charged in memory is added to the store. The
	// replicas learn each other's usage at their flushes, so a quota can be overshot by what
	// the other replicas charge within about one interval. Default 1s.
	FlushInterval time.Duration `yaml:"flushInterval"`
	// MaxClients bounds the client ids whose usage one replica holds in memory at once
	// (configured clients always count); the charges of further client ids are not
	// recorded (web3gate_quota_unrecorded_units_total). Default 100000.
	MaxClients int `yaml:"maxClients"`
	// Clients are the quotas, per client id.
	Clients []ClientQuota `yaml:"clients"`
}

// ClientQuota is the quota of one client id; 0 in a period means no quota in that period.
type ClientQuota struct {
	ClientID string `yaml:"clientId"`
	// Daily is the units the client may spend per UTC day (midnight to midnight).
	Daily uint64 `yaml:"daily"`
	// Monthly is the units the client may spend per UTC calendar month.
	Monthly uint64 `yaml:"monthly"`
}

// SetDefaults fills unset (zero) fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.FlushInterval, DefaultFlushInterval)
	defaults.Set(&c.MaxClients, DefaultMaxClients)
}

// Validate checks c (after SetDefaults); each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.FlushInterval < minFlushInterval || c.FlushInterval > maxFlushInterval {
		add("flushInterval: must be between %s and %s, got %s", minFlushInterval, maxFlushInterval, c.FlushInterval)
	}
	if c.MaxClients < 1 || c.MaxClients > maxMaxClients {
		add("maxClients: must be between 1 and %d, got %d", maxMaxClients, c.MaxClients)
	}
	seen := map[string]int{}
	for i, q := range c.Clients {
		switch {
		case q.ClientID == "":
			add("clients[%d].clientId: must not be empty", i)
		case len(q.ClientID) > maxClientIDLen:
			add("clients[%d].clientId: must be at most %d bytes", i, maxClientIDLen)
		case !recordable(q.ClientID):
			add("clients[%d].clientId: must be valid UTF-8 without NUL characters", i)
		default:
			if j, dup := seen[q.ClientID]; dup {
				add("clients[%d].clientId: %q is also clients[%d]: one entry per client id", i, q.ClientID, j)
			}
			seen[q.ClientID] = i
		}
		if q.Daily == 0 && q.Monthly == 0 {
			add("clients[%d]: daily and monthly are both 0 (no quota): set one, or remove the entry", i)
		}
		if q.Daily > maxQuota || q.Monthly > maxQuota {
			add("clients[%d]: a quota must be at most %d units", i, uint64(maxQuota))
		}
	}
	return errors.Join(errs...)
}
