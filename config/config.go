// Package config loads web3gate's configuration strictly: environment variables expanded,
// YAML decoded with unknown keys rejected, defaults applied, every section validated with
// messages that name the key path.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/middleware/cache"
	"github.com/web3gate/web3gate/middleware/filters"
	"github.com/web3gate/web3gate/middleware/ratelimit"
	"github.com/web3gate/web3gate/middleware/route"
	"github.com/web3gate/web3gate/owners"
	"github.com/web3gate/web3gate/products"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/quotas"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
	"github.com/web3gate/web3gate/webhooks"
)

// Config is the whole of config.yaml.
type Config struct {
	Server    proxy.Config      `yaml:"server"`
	Admin     proxy.AdminConfig `yaml:"admin"`
	Log       LogConfig         `yaml:"log"`
	Auth      auth.Config       `yaml:"auth"`
	Routing   route.Config      `yaml:"routing"`
	Cache     cache.Config      `yaml:"cache"`
	Upstreams upstreams.Config  `yaml:"upstreams"`
	Devchain  devchain.Config   `yaml:"devchain"`
	Store     store.Config      `yaml:"store"`
	Wallet    WalletConfig      `yaml:"wallet"`
	Metadata  metadata.Config   `yaml:"metadata"`
	Owners    owners.Config     `yaml:"owners"`
	Feeds     feeds.Config      `yaml:"feeds"`
	Filters   filters.Config    `yaml:"filters"`
	Products  products.Config   `yaml:"products"`
	Cluster   lease.Config      `yaml:"cluster"`
	Redis     redisx.Config     `yaml:"redis"`
	Quotas    quotas.Config     `yaml:"quotas"`
	RateLimit ratelimit.Config  `yaml:"rateLimit"`
	Webhooks  webhooks.Config   `yaml:"webhooks"`
	Tracing   tracing.Config    `yaml:"tracing"`
}

// LogConfig is the `log:` section.
type LogConfig struct {
	Level string `yaml:"level"`
	// Format is auto (console on a terminal, else JSON), console or json (docs/logging.md).
	Format string `yaml:"format"`
	// Requests is the request log: every failed request, a sample of the others.
	Requests proxy.RequestLogConfig `yaml:"requests"`
	// Flood bounds similar lines (the request log's failures, the token endpoint's refusals).
	Flood logx.Config `yaml:"flood"`
}

// The quickstart credentials of the shipped config.yaml. They are refused unless the
// embedded dev chain serves mainnet.
const (
	DevClientID = "web3gate-dev"
	DevToken    = "dev-access-token"
)

// Default is the configuration before a file is applied: the defaults that a zero value
// could not tell from an explicit setting (booleans that default to true, maxLag: 0).
func Default() Config {
	var c Config
	c.Upstreams = upstreams.DefaultConfig()
	c.Cache.Enabled = true
	c.Server.WebSocket.Enabled = true
	c.Server.DrainDelay = proxy.DefaultDrainDelay
	c.Cache.Coalesce = true
	c.Cache.Local = true
	c.Redis.MaxFlushDelay = redisx.DefaultMaxFlushDelay
	c.Devchain.BurstBlockInterval = devchain.DefaultBurstBlockInterval
	c.RateLimit.Enabled = true
	c.RateLimit.REST.Enabled = true
	c.Webhooks.Enabled = true
	return c
}

// Load reads, expands, decodes, defaults and validates the file at path.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(raw)
}

// Parse is Load on the bytes of a file: parsed, environment variables expanded in each
// value, keys and durations checked against Config (messages name the key path and line),
// decoded, defaulted and validated.
func Parse(raw []byte) (*Config, error) {
	marked, refs := markEnvRefs(raw)
	var doc yaml.Node
	if err := yaml.Unmarshal(marked, &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if doc.Kind == 0 {
		return nil, errors.New("config: the file is empty")
	}
	if err := expandEnv(&doc, refs); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if problems := checkKeys(&doc, reflect.TypeFor[Config]()); len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	c := Default()
	if err := doc.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// SetDefaults fills every unset key with its default.
func (c *Config) SetDefaults() {
	c.Server.SetDefaults()
	c.Admin.SetDefaults()
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "auto"
	}
	c.Log.Flood.SetDefaults()
	c.Auth.SetDefaults()
	c.Routing.SetDefaults()
	c.Cache.SetDefaults()
	c.Upstreams.SetDefaults()
	c.Devchain.SetDefaults()
	c.Store.SetDefaults()
	c.Wallet.SetDefaults()
	c.Metadata.SetDefaults()
	c.Owners.SetDefaults()
	c.Feeds.SetDefaults()
	c.Filters.SetDefaults()
	c.Products.SetDefaults()
	c.Cluster.SetDefaults()
	c.Redis.SetDefaults()
	c.Quotas.SetDefaults()
	c.RateLimit.SetDefaults()
	c.Webhooks.SetDefaults()
	c.Tracing.SetDefaults()
}

// ValidationError lists every problem found, each naming its key path.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "config: " + strings.Join(e.Problems, "; ")
}

// Validate checks every section and the rules that span sections.
func (c *Config) Validate() error {
	var problems []string
	add := func(section string, err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				problems = append(problems, section+"."+e.Error())
			}
			return
		}
		problems = append(problems, section+"."+err.Error())
	}
	add("server", c.Server.Validate())
	add("admin", c.Admin.Validate())
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		problems = append(problems, fmt.Sprintf("log.level: %q is not one of debug, info, warn, error", c.Log.Level))
	}
	switch c.Log.Format {
	case "auto", "console", "json":
	default:
		problems = append(problems, fmt.Sprintf("log.format: %q is not one of auto, console, json", c.Log.Format))
	}
	add("log.requests", c.Log.Requests.Validate())
	add("log.flood", c.Log.Flood.Validate())
	add("auth", c.Auth.Validate())
	add("routing", c.Routing.Validate())
	add("cache", c.Cache.Validate())
	add("upstreams", c.Upstreams.Validate())
	if c.Devchain.Enabled {
		add("devchain", c.Devchain.Validate())
	}
	add("store", c.Store.Validate())
	add("wallet", c.Wallet.Validate())
	add("metadata", c.Metadata.Validate())
	add("owners", c.Owners.Validate(c.Upstreams.Chains))
	add("feeds", c.Feeds.Validate())
	add("filters", c.Filters.Validate())
	add("products", c.Products.Validate())
	add("cluster", c.Cluster.Validate())
	add("redis", c.Redis.Validate())
	add("quotas", c.Quotas.Validate())
	add("rateLimit", c.RateLimit.Validate())
	add("webhooks", c.Webhooks.Validate())
	add("tracing", c.Tracing.Validate())
	problems = append(problems, c.crossCheck()...)
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
}

// crossCheck holds the rules that span sections: embedded upstreams need the dev chain, and
// the dev credentials live only while the dev chain is mainnet.
func (c *Config) crossCheck() []string {
	var problems []string
	mainnetEmbedded := false
	for i, ch := range c.Upstreams.Chains {
		for j, u := range ch.URLs {
			if u != "embedded" {
				continue
			}
			switch {
			case !c.Devchain.Enabled:
				problems = append(problems, fmt.Sprintf("upstreams.chains[%d].urls[%d]: embedded needs devchain.enabled: true", i, j))
			case ch.ChainID != c.Devchain.ChainID:
				problems = append(problems, fmt.Sprintf("upstreams.chains[%d].urls[%d]: embedded serves chain %d (devchain.chainId), not %d", i, j, c.Devchain.ChainID, ch.ChainID))
			}
		}
		if ch.ChainID == c.Upstreams.Mainnet {
			mainnetEmbedded = len(ch.URLs) > 0
			for _, u := range ch.URLs {
				mainnetEmbedded = mainnetEmbedded && u == "embedded"
			}
		}
	}
	if c.Devchain.Enabled {
		for i, ns := range c.Routing.ExtraNamespaces {
			if ns == "admin" || ns == "debug" || ns == "miner" {
				problems = append(problems, fmt.Sprintf("routing.extraNamespaces[%d]: %s is refused while the embedded dev chain runs: its in-process node would act on the web3gate process itself", i, ns))
			}
		}
	}
	if c.Quotas.Enabled && !c.RateLimit.Enabled {
		problems = append(problems, "quotas.enabled: true needs rateLimit.enabled: true (the rate-limit stage prices each request and charges the quotas)")
	}
	if c.Cache.Enabled && !c.Cache.Local && !c.Redis.Enabled() {
		problems = append(problems, "cache.local: false needs redis.url (with neither level nothing is cached; to cache nothing set cache.enabled: false)")
	}
	if mainnetEmbedded {
		return problems
	}
	devHash := sha256.Sum256([]byte(DevToken))
	for i, t := range c.Auth.Tokens {
		if strings.EqualFold(t.SHA256, hex.EncodeToString(devHash[:])) {
			problems = append(problems, fmt.Sprintf("auth.tokens[%d]: the dev token %q is accepted only while the embedded dev chain serves mainnet; remove it before using a real upstream", i, DevToken))
		}
	}
	for i, cl := range c.Auth.Clients {
		if cl.ID == DevClientID {
			problems = append(problems, fmt.Sprintf("auth.clients[%d]: the dev client id %q is accepted only while the embedded dev chain serves mainnet; remove it before using a real upstream", i, DevClientID))
		}
	}
	return problems
}
