package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `rateLimit:` section.
type Config struct {
	// Enabled limits the JSON-RPC routes (default true; see config.Default). REST has its own
	// switch (rest.enabled).
	Enabled bool `yaml:"enabled"`
	// Replicas is how many replicas share the budgets: a replica that limits on its own (no
	// Redis configured, or Redis down) allows each budget divided by it. Default 1.
	Replicas int `yaml:"replicas"`
	// RedisTimeout bounds the shared limiter's round trip to Redis; a slower or failed one is
	// decided by the local limiter. Default 50ms.
	RedisTimeout time.Duration `yaml:"redisTimeout"`
	// Client is the budget of any client id without an entry in Clients.
	Client Rate `yaml:"client"`
	// Principal is the budget of any principal (access token subject) without an entry in
	// Principals.
	Principal Rate `yaml:"principal"`
	// Costs override the default cost table: method → compute units.
	Costs map[string]uint64 `yaml:"costs"`
	// GetLogsBlocksPerUnit: eth_getLogs costs its base cost plus one unit per this many blocks
	// of its range. Default 1000.
	GetLogsBlocksPerUnit uint64 `yaml:"getLogsBlocksPerUnit"`
	// SubscribeBytesPerUnit: eth_subscribe costs its base cost plus one unit per this many
	// bytes of its params (a logs filter is held, and matched against every block, while
	// the subscription lives). Default 1024.
	SubscribeBytesPerUnit uint64 `yaml:"subscribeBytesPerUnit"`
	// MaxKeys bounds the keys the local limiter keeps of each kind (client ids, principals,
	// REST client ids, source addresses). Default 100000.
	MaxKeys int `yaml:"maxKeys"`
	// Clients are budgets (and cost overrides) of named client ids; each gets its own label
	// value in the metrics.
	Clients []ClientConfig `yaml:"clients"`
	// Principals are budgets of named principals.
	Principals []PrincipalConfig `yaml:"principals"`
	// REST limits the public REST routes (tokens, contract, owners, products).
	REST RESTConfig `yaml:"rest"`
}

// Rate is a budget: Rate units per second, at most Burst at once.
type Rate struct {
	Rate  float64 `yaml:"rate"`
	Burst uint64  `yaml:"burst"`
}

// ClientConfig is the budget of one client id.
type ClientConfig struct {
	ClientID string `yaml:"clientId"`
	Rate     `yaml:",inline"`
	// Costs override the cost table (the defaults and rateLimit.costs) for this client.
	Costs map[string]uint64 `yaml:"costs"`
}

// PrincipalConfig is the budget of one principal.
type PrincipalConfig struct {
	ID   string `yaml:"id"`
	Rate `yaml:",inline"`
}

// RESTConfig is `rateLimit.rest`: requests (not compute units) per second.
type RESTConfig struct {
	// Enabled limits the REST routes (default true; see config.Default).
	Enabled bool `yaml:"enabled"`
	// IP is the budget of a source address (requests without a known client id).
	IP Rate `yaml:"ip"`
	// Client is the budget of a known client id (X-API-Key or apiKey).
	Client Rate `yaml:"client"`
}

// The defaults; docs/rate-limits.md says why these.
var (
	DefaultClient     = Rate{Rate: 2000, Burst: 20000}
	DefaultPrincipal  = Rate{Rate: 1000, Burst: 10000}
	DefaultRESTIP     = Rate{Rate: 10, Burst: 100}
	DefaultRESTClient = Rate{Rate: 100, Burst: 500}
)

// SetDefaults fills unset fields with their defaults (Enabled and REST.Enabled: see
// config.Default).
func (c *Config) SetDefaults() {
	defaults.Set(&c.Replicas, 1)
	defaults.Set(&c.RedisTimeout, 50*time.Millisecond)
	defaults.Set(&c.GetLogsBlocksPerUnit, 1000)
	defaults.Set(&c.SubscribeBytesPerUnit, 1024)
	defaults.Set(&c.MaxKeys, 100000)
	c.Client.setDefaults(DefaultClient)
	c.Principal.setDefaults(DefaultPrincipal)
	c.REST.IP.setDefaults(DefaultRESTIP)
	c.REST.Client.setDefaults(DefaultRESTClient)
}

func (r *Rate) setDefaults(d Rate) {
	if r.Rate == 0 && r.Burst == 0 {
		*r = d
	}
}

// maxBurst bounds a burst: the local limiter keeps times in nanoseconds.
const maxBurst = 1 << 40

func (r Rate) problems(key string) []error {
	var errs []error
	if !(r.Rate > 0) || math.IsInf(r.Rate, 0) || r.Rate > 1e9 {
		errs = append(errs, fmt.Errorf("%s.rate: must be a positive number of units per second, at most 1e9", key))
	}
	if r.Burst < 1 || r.Burst > maxBurst {
		errs = append(errs, fmt.Errorf("%s.burst: must be between 1 and %d", key, uint64(maxBurst)))
	}
	return errs
}

// maxCost bounds a cost in the table.
const maxCost = 1 << 20

// localMethodList names LocalMethods in the messages.
const localMethodList = "eth_chainId, net_version, web3_clientVersion, eth_unsubscribe and eth_uninstallFilter"

func costProblems(key string, costs map[string]uint64) []error {
	var errs []error
	for m, v := range costs {
		if strings.TrimSpace(m) == "" || len(m) > 128 {
			errs = append(errs, fmt.Errorf("%s: %q is not a method name", key, m))
		}
		if v > maxCost {
			errs = append(errs, fmt.Errorf("%s.%s: at most %d", key, m, maxCost))
		}
		if v == 0 && !LocalMethods[m] {
			errs = append(errs, fmt.Errorf("%s.%s: must be at least 1: the method is forwarded to a node (only %s, answered by web3gate itself, may cost 0)",
				key, m, localMethodList))
		}
	}
	return errs
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if c.Replicas < 1 || c.Replicas > 10000 {
		errs = append(errs, errors.New("replicas: must be between 1 and 10000"))
	}
	if c.RedisTimeout < time.Millisecond || c.RedisTimeout > 10*time.Second {
		errs = append(errs, errors.New("redisTimeout: must be between 1ms and 10s"))
	}
	if c.GetLogsBlocksPerUnit < 1 {
		errs = append(errs, errors.New("getLogsBlocksPerUnit: must be at least 1"))
	}
	if c.SubscribeBytesPerUnit < 1 {
		errs = append(errs, errors.New("subscribeBytesPerUnit: must be at least 1"))
	}
	if c.MaxKeys < 16 || c.MaxKeys > 100_000_000 {
		errs = append(errs, errors.New("maxKeys: must be between 16 and 100000000"))
	}
	errs = append(errs, c.Client.problems("client")...)
	errs = append(errs, c.Principal.problems("principal")...)
	errs = append(errs, costProblems("costs", c.Costs)...)
	seen := map[string]int{}
	for i, cl := range c.Clients {
		key := fmt.Sprintf("clients[%d]", i)
		if strings.TrimSpace(cl.ClientID) == "" || len(cl.ClientID) > 256 {
			errs = append(errs, fmt.Errorf("%s.clientId: must be a client id of 1 to 256 characters", key))
		}
		if cl.ClientID == labelOther || cl.ClientID == labelAnonymous {
			errs = append(errs, fmt.Errorf("%s.clientId: %q is a label value of the metrics; rename the client id", key, cl.ClientID))
		}
		if j, dup := seen[cl.ClientID]; dup {
			errs = append(errs, fmt.Errorf("%s.clientId: duplicate of clients[%d]", key, j))
		}
		seen[cl.ClientID] = i
		errs = append(errs, cl.Rate.problems(key)...)
		errs = append(errs, costProblems(key+".costs", cl.Costs)...)
	}
	seen = map[string]int{}
	for i, p := range c.Principals {
		key := fmt.Sprintf("principals[%d]", i)
		if strings.TrimSpace(p.ID) == "" || len(p.ID) > 256 {
			errs = append(errs, fmt.Errorf("%s.id: must be a principal of 1 to 256 characters", key))
		}
		if j, dup := seen[p.ID]; dup {
			errs = append(errs, fmt.Errorf("%s.id: duplicate of principals[%d]", key, j))
		}
		seen[p.ID] = i
		errs = append(errs, p.Rate.problems(key)...)
	}
	errs = append(errs, c.REST.IP.problems("rest.ip")...)
	errs = append(errs, c.REST.Client.problems("rest.client")...)
	return errors.Join(errs...)
}
