package redisx

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `redis:` section: the Redis that N replicas share as the second level of
// their in-process caches. An empty URL turns Redis off.
type Config struct {
	// URL is redis://[user:password@]host[:port][/db] or rediss:// (TLS). Empty: no Redis.
	// Write the password as ${ENV}: the config loader expands it.
	URL string `yaml:"url"`
	// KeyPrefix starts every key web3gate writes, so that one Redis can serve several
	// deployments (give each its own). Default "web3gate:".
	KeyPrefix string `yaml:"keyPrefix"`
	// Timeout bounds one operation. A lookup that takes longer is a miss: the request goes on
	// to the store or the upstream. Default 50ms.
	Timeout time.Duration `yaml:"timeout"`
	// DialTimeout bounds a connection attempt (TCP and TLS). Default 1s.
	DialTimeout time.Duration `yaml:"dialTimeout"`
	// PoolSize is the number of connections to Redis, a power of two from 1 to 256; the
	// operations of concurrent requests travel pipelined on them. 0 (the default): one per
	// 4 CPUs (GOMAXPROCS), at least 1, at most 8.
	PoolSize int `yaml:"poolSize"`
	// MaxFlushDelay: while operations of several requests are in flight, each write to Redis
	// waits up to this long for more of them to travel together (fewer system calls in
	// web3gate and in Redis), adding at most this much latency; an operation alone is written
	// at once. 0: always write at once. Default 100µs (DefaultMaxFlushDelay, set by the config
	// loader before the file: a zero here is an explicit 0).
	MaxFlushDelay time.Duration `yaml:"maxFlushDelay"`
	// MaxTTL is the longest an entry lives in Redis: entries the local caches keep until
	// evicted get this expiry in Redis. Default 24h.
	MaxTTL time.Duration `yaml:"maxTtl"`
	// FailureThreshold failed operations in a row (errors or timeouts; not Redis's own
	// error replies) mark Redis down. Default 3.
	FailureThreshold int `yaml:"failureThreshold"`
	// While Redis is down nothing is sent to it; a background probe (PING, or a new
	// connection) tries again after Backoff, doubling after each failed probe up to
	// MaxBackoff; the first probe that succeeds marks it up. Defaults 1s and 30s.
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"maxBackoff"`
	// DownLogInterval: Redis trouble is logged at most once per interval (each log says how
	// many failures it stands for). Default 1m.
	DownLogInterval time.Duration `yaml:"downLogInterval"`
	// MaxWritesInFlight bounds the cache fills sent to Redis in the background; a fill
	// beyond it is dropped (counted). Default 256.
	MaxWritesInFlight int `yaml:"maxWritesInFlight"`
}

// DefaultMaxFlushDelay is maxFlushDelay's default.
const DefaultMaxFlushDelay = 100 * time.Microsecond

// connections is the number of connections to open: PoolSize, or for 0 one per 4 CPUs (the
// largest power of two at most GOMAXPROCS/4), from 1 to 8. Fewer connections carry larger
// pipelined batches, so fewer system calls per operation in web3gate and in Redis
// (docs/performance.md, "Notes from the code", internal/redisx).
func (c *Config) connections() int {
	if c.PoolSize > 0 {
		return c.PoolSize
	}
	n := 1
	for n*2 <= min(runtime.GOMAXPROCS(0)/4, 8) {
		n *= 2
	}
	return n
}

// Enabled reports whether Redis is configured.
func (c *Config) Enabled() bool { return c.URL != "" }

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.KeyPrefix, "web3gate:")
	defaults.Set(&c.Timeout, 50*time.Millisecond)
	defaults.Set(&c.DialTimeout, time.Second)
	defaults.Set(&c.MaxTTL, 24*time.Hour)
	defaults.Set(&c.FailureThreshold, 3)
	defaults.Set(&c.Backoff, time.Second)
	defaults.Set(&c.MaxBackoff, 30*time.Second)
	defaults.Set(&c.DownLogInterval, time.Minute)
	defaults.Set(&c.MaxWritesInFlight, 256)
}

// Validate checks c; each message names its key within the section. No message repeats any
// part of the URL: it may hold a password.
func (c *Config) Validate() error {
	var errs []error
	if c.URL != "" {
		if _, err := parseURL(c.URL); err != nil {
			errs = append(errs, fmt.Errorf("url: %w", err))
		}
	}
	if len(c.KeyPrefix) > 64 {
		errs = append(errs, errors.New("keyPrefix: must be at most 64 bytes"))
	}
	for _, r := range c.KeyPrefix {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`*?[]\`, r) {
			errs = append(errs, errors.New(`keyPrefix: printable ASCII only, without spaces or the pattern characters * ? [ ] \`))
			break
		}
	}
	if c.Timeout < time.Millisecond || c.Timeout > 5*time.Second {
		errs = append(errs, errors.New("timeout: must be from 1ms to 5s (Redis is asked while a request waits)"))
	}
	if c.DialTimeout < 10*time.Millisecond || c.DialTimeout > time.Minute {
		errs = append(errs, errors.New("dialTimeout: must be from 10ms to 1m"))
	}
	if c.PoolSize < 0 || c.PoolSize > 256 || c.PoolSize&(c.PoolSize-1) != 0 {
		errs = append(errs, errors.New("poolSize: must be 0 (one connection per 4 CPUs) or a power of two from 1 to 256"))
	}
	if c.MaxFlushDelay < 0 || c.MaxFlushDelay > time.Millisecond {
		errs = append(errs, errors.New("maxFlushDelay: must be from 0 to 1ms"))
	}
	if c.MaxTTL < time.Second {
		errs = append(errs, errors.New("maxTtl: must be at least 1s"))
	}
	if c.FailureThreshold < 1 || c.FailureThreshold > 1000 {
		errs = append(errs, errors.New("failureThreshold: must be from 1 to 1000"))
	}
	if c.Backoff < 10*time.Millisecond {
		errs = append(errs, errors.New("backoff: must be at least 10ms"))
	}
	if c.MaxBackoff < c.Backoff {
		errs = append(errs, errors.New("maxBackoff: must be at least backoff"))
	}
	if c.DownLogInterval < time.Second {
		errs = append(errs, errors.New("downLogInterval: must be at least 1s"))
	}
	if c.MaxWritesInFlight < 1 || c.MaxWritesInFlight > 1<<16 {
		errs = append(errs, errors.New("maxWritesInFlight: must be from 1 to 65536"))
	}
	return errors.Join(errs...)
}

// target is what a URL says: where to connect and how to log in.
type target struct {
	addr     string // host:port, the only part of the URL that logs show
	host     string // for TLS server name
	tls      bool
	username string
	password string
	db       int
}

// parseURL reads a redis:// or rediss:// URL. Its errors never quote the URL or any part of
// it.
func parseURL(s string) (target, error) {
	var t target
	u, err := url.Parse(s)
	if err != nil {
		return t, errors.New("not a URL (write it as redis://[user:password@]host[:port][/db]; percent-encode reserved characters in the password)")
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		t.tls = true
	default:
		return t, errors.New("the scheme must be redis or rediss")
	}
	if u.Opaque != "" || u.Host == "" {
		return t, errors.New("a host is needed: redis://host[:port][/db]")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return t, errors.New("query parameters and fragments are not supported: set the keys of the redis section instead")
	}
	t.host = u.Hostname()
	if t.host == "" {
		return t, errors.New("a host is needed: redis://host[:port][/db]")
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return t, errors.New("the port must be a number from 1 to 65535")
	}
	t.addr = net.JoinHostPort(t.host, port)
	switch p := strings.TrimPrefix(u.Path, "/"); {
	case u.Path == "" || p == "":
	case strings.Trim(p, "0123456789") != "" || len(p) > 5:
		return t, errors.New("the path must be a database number (/0), nothing else (percent-encode / and @ in a password)")
	default:
		t.db, _ = strconv.Atoi(p)
	}
	if u.User != nil {
		t.username = u.User.Username()
		t.password, _ = u.User.Password()
	}
	return t, nil
}
