package redisx

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := Config{URL: "redis://127.0.0.1:6379/0"}
	c.SetDefaults()
	return c
}

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c.Enabled() {
		t.Error("no url: Redis must be off")
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.KeyPrefix != "web3gate:" || c.Timeout != 50*time.Millisecond || c.PoolSize != 0 || c.DownLogInterval != time.Minute {
		t.Errorf("defaults %+v", c)
	}
}

func TestPoolSize(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct{ pool, procs, want int }{
		{0, 1, 1}, {0, 2, 1}, {0, 7, 1}, {0, 8, 2}, {0, 16, 4}, {0, 64, 8}, {0, 256, 8}, {4, 1, 4}, {1, 64, 1},
	} {
		runtime.GOMAXPROCS(tc.procs)
		c := Config{PoolSize: tc.pool}
		if got := c.connections(); got != tc.want {
			t.Errorf("poolSize %d on %d CPUs: %d connections, want %d", tc.pool, tc.procs, got, tc.want)
		}
	}
}

func TestConfigAcceptsURLs(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1", "redis://localhost:6380", "redis://:secret@10.0.0.5:6379/3",
		"rediss://user:p%40ss%2Fw@redis.example.com:6380/0", "redis://[::1]:6379/", "redis://cache",
	} {
		c := validConfig()
		c.URL = u
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"scheme", func(c *Config) { c.URL = "http://127.0.0.1:6379" }, "url: the scheme must be redis or rediss"},
		{"unix", func(c *Config) { c.URL = "unix:///tmp/redis.sock" }, "url: the scheme must be redis or rediss"},
		{"no host", func(c *Config) { c.URL = "redis:///0" }, "url: a host is needed"},
		{"port", func(c *Config) { c.URL = "redis://127.0.0.1:0" }, "url: the port must be a number"},
		{"query", func(c *Config) { c.URL = "redis://127.0.0.1/0?dial_timeout=1s" }, "url: query parameters"},
		{"path", func(c *Config) { c.URL = "redis://127.0.0.1/zero" }, "url: the path must be a database number"},
		{"prefix chars", func(c *Config) { c.KeyPrefix = "web3gate*" }, "keyPrefix: printable ASCII only"},
		{"prefix space", func(c *Config) { c.KeyPrefix = "web 3" }, "keyPrefix: printable ASCII only"},
		{"prefix long", func(c *Config) { c.KeyPrefix = strings.Repeat("p", 65) }, "keyPrefix: must be at most 64 bytes"},
		{"timeout", func(c *Config) { c.Timeout = 10 * time.Second }, "timeout: must be from 1ms to 5s"},
		{"timeout small", func(c *Config) { c.Timeout = time.Microsecond }, "timeout: must be from 1ms to 5s"},
		{"dial", func(c *Config) { c.DialTimeout = time.Millisecond }, "dialTimeout: must be from 10ms to 1m"},
		{"pool", func(c *Config) { c.PoolSize = 3 }, "poolSize: must be 0 (one connection per 4 CPUs) or a power of two from 1 to 256"},
		{"pool big", func(c *Config) { c.PoolSize = 512 }, "poolSize: must be 0"},
		{"ttl", func(c *Config) { c.MaxTTL = time.Millisecond }, "maxTtl: must be at least 1s"},
		{"flush delay", func(c *Config) { c.MaxFlushDelay = 2 * time.Millisecond }, "maxFlushDelay: must be from 0 to 1ms"},
		{"threshold", func(c *Config) { c.FailureThreshold = -1 }, "failureThreshold: must be from 1 to 1000"},
		{"backoff", func(c *Config) { c.Backoff = time.Millisecond }, "backoff: must be at least 10ms"},
		{"max backoff", func(c *Config) { c.MaxBackoff = 500 * time.Millisecond }, "maxBackoff: must be at least backoff"},
		{"log interval", func(c *Config) { c.DownLogInterval = time.Millisecond }, "downLogInterval: must be at least 1s"},
		{"writes", func(c *Config) { c.MaxWritesInFlight = -5 }, "maxWritesInFlight: must be from 1 to 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.set(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestConfigErrorsNeverShowThePassword: whatever is wrong with a URL, its message quotes no
// part of it, so a password (or a piece of one misread as a host or path) stays out of logs.
func TestConfigErrorsNeverShowThePassword(t *testing.T) {
	const secret = "Hunter2Secret"
	for _, u := range []string{
		"redis://:" + secret + "@127.0.0.1:notaport",
		"redis://user:" + secret + "/x@127.0.0.1:6379",
		"redis://user:" + secret + "#frag@127.0.0.1:6379",
		"redis://user:" + secret + "@127.0.0.1:6379/0?password=" + secret,
		"redis://user:" + secret + "@127.0.0.1:6379/" + secret,
		"redis://user:" + secret + "@/0",
		"http://user:" + secret + "@127.0.0.1:6379",
		"redis://user:%zz" + secret + "@127.0.0.1",
		"redis ://" + secret + "@host",
		":" + secret,
	} {
		c := validConfig()
		c.URL = u
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: accepted", u)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:6]) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
