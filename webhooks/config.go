package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/internal/netpolicy"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// Config is the `webhooks:` section.
type Config struct {
	// Enabled runs the deliverer (on one replica at a time). false: nothing is delivered;
	// the events of enabled endpoints are still recorded and go out once it is true again.
	Enabled bool `yaml:"enabled"`
	// Timeout bounds one delivery attempt: connecting, sending, the answer's headers.
	Timeout time.Duration `yaml:"timeout"`
	// MaxAttempts is how many attempts a delivery gets; after the last failure it is dead.
	MaxAttempts int `yaml:"maxAttempts"`
	// Backoff is the delay after the first failure, doubled after each further one, up to
	// MaxBackoff.
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"maxBackoff"`
	// Concurrency is how many deliveries are in flight at once (never two of one
	// transaction to one endpoint).
	Concurrency int `yaml:"concurrency"`
	// PollInterval is how often the outbox is read when nothing else woke the deliverer.
	PollInterval time.Duration `yaml:"pollInterval"`
	// Retention is how long delivered and dead deliveries, and the events no delivery refers
	// to any more, are kept before the deliverer deletes them; 0 keeps them forever. Unset:
	// DefaultRetention.
	Retention *time.Duration `yaml:"retention"`
	// AllowNetworks are CIDR prefixes (or addresses) exempt from the address policy that
	// refuses loopback, private and link-local destinations (the metadata fetcher's).
	AllowNetworks []string `yaml:"allowNetworks"`
	// Endpoints from the config, synced into the store at start.
	Endpoints []EndpointConfig `yaml:"endpoints"`
	// Admin is the webhook admin API on the admin listener.
	Admin AdminConfig `yaml:"admin"`
}

// EndpointConfig is one entry of webhooks.endpoints.
type EndpointConfig struct {
	Principal string `yaml:"principal"`
	URL       string `yaml:"url"`
	// SecretEnv names the environment variable holding the endpoint's signing secret (at
	// least 16 characters); a secret is never written in the file.
	SecretEnv string `yaml:"secretEnv"`
}

// AdminConfig is `webhooks.admin`.
type AdminConfig struct {
	// Tokens are the bearer tokens the webhook admin API accepts (as products.admin.tokens
	// and auth.oauth.admin.tokens). None: the API answers 403.
	Tokens []proxy.AdminToken `yaml:"tokens"`
}

// Defaults and bounds.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxAttempts  = 12
	DefaultBackoff      = time.Second
	DefaultMaxBackoff   = 10 * time.Minute
	DefaultConcurrency  = 8
	DefaultPollInterval = 500 * time.Millisecond
	DefaultRetention    = 7 * 24 * time.Hour

	maxRetention = 10 * 365 * 24 * time.Hour

	minSecretLen = 16
	maxURLLen    = 2048
	maxPrincipal = 256
)

// SetDefaults fills unset fields with their defaults. Enabled is left as it is.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Timeout, DefaultTimeout)
	defaults.Set(&c.MaxAttempts, DefaultMaxAttempts)
	defaults.Set(&c.Backoff, DefaultBackoff)
	defaults.Set(&c.MaxBackoff, DefaultMaxBackoff)
	defaults.Set(&c.Concurrency, DefaultConcurrency)
	defaults.Set(&c.PollInterval, DefaultPollInterval)
	if c.Retention == nil {
		r := DefaultRetention
		c.Retention = &r
	}
	for i := range c.Admin.Tokens {
		defaults.Set(&c.Admin.Tokens[i].Name, fmt.Sprintf("tokens[%d]", i))
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks c (the endpoints' secret variables must be set); each message names its
// key within the section.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Timeout < 100*time.Millisecond || c.Timeout > 5*time.Minute {
		add("timeout: must be between 100ms and 5m")
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		add("maxAttempts: must be between 1 and 100")
	}
	if c.Backoff < 10*time.Millisecond || c.Backoff > time.Hour {
		add("backoff: must be between 10ms and 1h")
	}
	if c.MaxBackoff < c.Backoff || c.MaxBackoff > 24*time.Hour {
		add("maxBackoff: must be between backoff and 24h")
	}
	if c.Concurrency < 1 || c.Concurrency > 256 {
		add("concurrency: must be between 1 and 256")
	}
	if c.PollInterval < 10*time.Millisecond || c.PollInterval > time.Minute {
		add("pollInterval: must be between 10ms and 1m")
	}
	if r := c.retention(); r != 0 && (r < time.Minute || r > maxRetention) {
		add("retention: must be 0s (keep forever) or between 1m and 87600h")
	}
	policy, err := netpolicy.New(c.AllowNetworks)
	if err != nil {
		errs = append(errs, err)
	}
	seen := map[[2]string]int{}
	for i, e := range c.Endpoints {
		if err := checkPrincipal(e.Principal); err != nil {
			add("endpoints[%d].principal: %v", i, err)
		}
		if err := checkURL(e.URL, policy); err != nil {
			add("endpoints[%d].url: %v", i, err)
		}
		k := [2]string{e.Principal, e.URL}
		if j, dup := seen[k]; dup {
			add("endpoints[%d]: the same principal and url as endpoints[%d]", i, j)
		}
		seen[k] = i
		switch {
		case !envName.MatchString(e.SecretEnv):
			add("endpoints[%d].secretEnv: must name an environment variable (the endpoint's signing secret), got %q", i, clip(e.SecretEnv))
		case len(os.Getenv(e.SecretEnv)) < minSecretLen:
			add("endpoints[%d].secretEnv: the environment variable %s must hold the endpoint's signing secret, at least %d characters", i, e.SecretEnv, minSecretLen)
		}
	}
	hashes := map[string]int{}
	names := map[string]int{}
	for i, t := range c.Admin.Tokens {
		h := strings.ToLower(t.SHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			add("admin.tokens[%d].sha256: must be 64 hex digits (the SHA-256 of the token; web3gate auth hash-token makes it)", i)
		} else if j, dup := hashes[h]; dup {
			add("admin.tokens[%d].sha256: duplicate of admin.tokens[%d]", i, j)
		} else {
			hashes[h] = i
		}
		switch j, dup := names[t.Name]; {
		case strings.TrimSpace(t.Name) == "" || len(t.Name) > 64 || strings.ContainsFunc(t.Name, unicode.IsControl):
			add("admin.tokens[%d].name: must be 1 to 64 characters without control characters", i)
		case dup:
			add("admin.tokens[%d].name: duplicate of admin.tokens[%d]", i, j)
		default:
			names[t.Name] = i
		}
	}
	return errors.Join(errs...)
}

// checkPrincipal: not empty, storable, bounded.
func checkPrincipal(p string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New("must not be empty")
	}
	if len(p) > maxPrincipal {
		return fmt.Errorf("must be at most %d bytes", maxPrincipal)
	}
	if err := store.CheckText("principal", p); err != nil || strings.ContainsFunc(p, unicode.IsControl) {
		return errors.New("must be text without control characters")
	}
	return nil
}

// checkURL: an absolute http or https URL with a host, without credentials or a fragment,
// whose host is not a literal address (or localhost) the address policy refuses. A host name
// is checked again at each connection, after it was resolved.
func checkURL(raw string, policy netpolicy.Policy) error {
	if raw == "" {
		return errors.New("must not be empty")
	}
	if len(raw) > maxURLLen {
		return fmt.Errorf("must be at most %d bytes", maxURLLen)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return errors.New("must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an http:// or https:// URL")
	case u.Hostname() == "":
		return errors.New("must have a host")
	case u.User != nil:
		return errors.New("must not carry credentials (the signature authenticates web3gate to the endpoint)")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment")
	case !policy.AllowedHost(u.Hostname()):
		return errors.New("the destination address is not allowed (loopback, private and link-local networks are refused unless listed in webhooks.allowNetworks)")
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// retention is Retention, DefaultRetention when unset.
func (c *Config) retention() time.Duration {
	if c.Retention == nil {
		return DefaultRetention
	}
	return *c.Retention
}
