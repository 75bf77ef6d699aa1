package lease

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `cluster:` section: who this replica is, and how fast a lease passes to a
// standby when its holder dies.
type Config struct {
	// ReplicaID names this process in every log line (field replica), in the metric
	// web3gate_replica_info and as the holder of its leases. Default: the host name.
	ReplicaID string `yaml:"replicaId"`
	// LeaseTimeout bounds the time from the death of a lease's holder (killed, hung, cut off
	// from the database) to a standby running the job. Default 10s, at least 1s.
	LeaseTimeout time.Duration `yaml:"leaseTimeout"`
	// LeaseCheckInterval is how often a standby asks for a lease and a holder proves it is
	// alive. Default leaseTimeout/5; at most leaseTimeout/4.
	LeaseCheckInterval time.Duration `yaml:"leaseCheckInterval"`
	// LeaseNamespace sets apart the advisory lock keys of installations sharing one
	// PostgreSQL database (under different schemas); empty for one installation per database.
	LeaseNamespace string `yaml:"leaseNamespace"`
}

// DefaultLeaseTimeout is the default of leaseTimeout.
const DefaultLeaseTimeout = 10 * time.Second

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	if c.ReplicaID == "" {
		c.ReplicaID = hostReplicaID()
	}
	defaults.Set(&c.LeaseTimeout, DefaultLeaseTimeout)
	defaults.Set(&c.LeaseCheckInterval, c.LeaseTimeout/5)
}

var replicaIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$`)

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if !replicaIDPattern.MatchString(c.ReplicaID) {
		errs = append(errs, fmt.Errorf("replicaId: must be 1 to 63 letters, digits and . _ : - (starting with a letter or digit), got %q", c.ReplicaID))
	}
	if c.LeaseTimeout < time.Second {
		errs = append(errs, fmt.Errorf("leaseTimeout: must be at least 1s, got %s", c.LeaseTimeout))
	}
	switch {
	case c.LeaseCheckInterval < 10*time.Millisecond:
		errs = append(errs, fmt.Errorf("leaseCheckInterval: must be at least 10ms, got %s", c.LeaseCheckInterval))
	case c.LeaseCheckInterval > c.LeaseTimeout/4:
		errs = append(errs, fmt.Errorf("leaseCheckInterval: must be at most leaseTimeout/4 (%s), got %s", c.LeaseTimeout/4, c.LeaseCheckInterval))
	}
	if len(c.LeaseNamespace) > 200 {
		errs = append(errs, errors.New("leaseNamespace: must be at most 200 bytes"))
	}
	return errors.Join(errs...)
}

// hostReplicaID is the host name, cut to what replicaId allows; "web3gate" when there is none.
func hostReplicaID() string {
	h, err := os.Hostname()
	if err != nil {
		return "web3gate"
	}
	h = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == ':', r == '-':
			return r
		}
		return -1
	}, h)
	h = strings.TrimLeft(h, "._:-")
	if len(h) > 63 {
		h = h[:63]
	}
	if h == "" {
		return "web3gate"
	}
	return h
}

// timings are the intervals both kinds of lease derive from leaseTimeout (L) and
// leaseCheckInterval (C); docs/leases.md explains each bound.
type timings struct {
	check time.Duration // standby poll, holder heartbeat or renewal cadence, and each one's timeout

	// PostgreSQL.
	grace       time.Duration // a new holder waits this long before it starts the job: C/2
	idleSession time.Duration // the server ends a silent lease session after this: L - 3C/2

	// Lease rows.
	ttl    time.Duration // a lease row's lifetime from the start of its last renewal: L - C
	renew  time.Duration // renewal cadence: min(C, ttl/3)
	giveUp time.Duration // a holder not renewed for this long cancels its job: ttl*2/3
}

func (c Config) timings() timings {
	l, ch := c.LeaseTimeout, c.LeaseCheckInterval
	ttl := l - ch
	return timings{
		check:       ch,
		grace:       ch / 2,
		idleSession: l - 3*ch/2,
		ttl:         ttl,
		renew:       min(ch, ttl/3),
		giveUp:      ttl * 2 / 3,
	}
}
