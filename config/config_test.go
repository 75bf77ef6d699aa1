package config

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestShippedConfigLoads(t *testing.T) {
	c, err := Load("../config.yaml")
	if err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	if c.Upstreams.Mainnet != 1337 || !c.Devchain.Enabled || c.Server.Listen != "127.0.0.1:8545" || c.Admin.Listen != "127.0.0.1:9545" {
		t.Fatalf("unexpected shipped config: %+v", c)
	}
	if q := c.Quotas; q.Enabled || q.FlushInterval != time.Second || q.MaxClients != 100_000 || len(q.Clients) != 0 {
		t.Fatalf("shipped quotas: %+v", q)
	}
}

const minimal = `
auth:
  clients: [{id: c1}]
upstreams:
  mainnet: 1
  chains:
    - chainId: 1
      urls: [http://127.0.0.1:1/]
`

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.MaxBodyBytes != 5<<20 || c.Server.MaxBatch != 100 || !c.Cache.Enabled || !c.Cache.Coalesce || c.Log.Level != "info" || *c.Upstreams.MaxLag != 5 ||
		!c.Server.WebSocket.Enabled || c.Server.WebSocket.QueueSize != 1024 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	c, err = Parse([]byte(minimal + "cache: {enabled: false, coalesce: false}\nserver: {websocket: {enabled: false}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Cache.Enabled || c.Cache.Coalesce || c.Server.WebSocket.Enabled {
		t.Fatal("explicit false overridden by a default")
	}
	host, _ := os.Hostname()
	if c.Cluster.ReplicaID == "" || host != "" && !strings.HasPrefix(host, c.Cluster.ReplicaID[:1]) ||
		c.Cluster.LeaseTimeout.String() != "10s" || c.Cluster.LeaseCheckInterval.String() != "2s" {
		t.Fatalf("cluster defaults: %+v (host name %q)", c.Cluster, host)
	}
}

func TestRedisDefaultsOff(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.Enabled() || c.Redis.KeyPrefix != "web3gate:" || !c.Cache.Local || c.Cache.MaxEntryBytes != 4<<20 {
		t.Fatalf("redis and cache defaults: %+v %+v", c.Redis, c.Cache)
	}
	if c.Redis.MaxFlushDelay != 100*time.Microsecond {
		t.Fatalf("maxFlushDelay %v", c.Redis.MaxFlushDelay)
	}
	c, err = Parse([]byte(minimal + "redis: {url: 'redis://127.0.0.1:6379/0', maxFlushDelay: 0s}\ncache: {local: false}\n"))
	if err != nil || !c.Redis.Enabled() || c.Cache.Local || c.Redis.MaxFlushDelay != 0 {
		t.Fatalf("redis on, local level off, writes at once: %v", err)
	}
}

// TestRedisPasswordFromEnvNeverInErrors: the password comes from the environment; a URL
// the loader refuses is reported without it.
func TestRedisPasswordFromEnvNeverInErrors(t *testing.T) {
	t.Setenv("W3G_TEST_REDIS_PASSWORD", "Sup3rSecretValue")
	for _, u := range []string{"redis://:${W3G_TEST_REDIS_PASSWORD}@127.0.0.1:bad", "redis://:${W3G_TEST_REDIS_PASSWORD}/x@127.0.0.1"} {
		_, err := Parse([]byte(minimal + "redis: {url: '" + u + "'}\n"))
		if err == nil || !strings.Contains(err.Error(), "redis.url: ") {
			t.Fatalf("%s: %v", u, err)
		}
		if strings.Contains(err.Error(), "Sup3r") {
			t.Fatalf("the error shows the password: %v", err)
		}
	}
	c, err := Parse([]byte(minimal + "redis: {url: 'redis://:${W3G_TEST_REDIS_PASSWORD}@127.0.0.1:6379'}\n"))
	if err != nil || c.Redis.URL != "redis://:Sup3rSecretValue@127.0.0.1:6379" {
		t.Fatalf("expanded: %v", err)
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Setenv("W3G_TEST_URL", "http://127.0.0.1:2/")
	c, err := Parse([]byte(strings.Replace(minimal, "http://127.0.0.1:1/", "${W3G_TEST_URL}", 1) + "log: {level: ${W3G_TEST_LEVEL:-warn}}\n# ${NOT_SET_BUT_A_COMMENT}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstreams.Chains[0].URLs[0] != "http://127.0.0.1:2/" || c.Log.Level != "warn" {
		t.Fatalf("not expanded: %v %q", c.Upstreams.Chains[0].URLs, c.Log.Level)
	}
	_, err = Parse([]byte(minimal + "log: {level: ${W3G_TEST_UNSET_VAR}}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 9: log.level: environment variable W3G_TEST_UNSET_VAR is not set") {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestRejects(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", minimal + "server: {listen: 127.0.0.1:1, colour: red}\n", []string{`line 9: server.colour: unknown key "colour" (the keys of server: batchConcurrency, cors,`}},
		{"unknown section", minimal + "nope: 1\n", []string{`line 9: nope: unknown key "nope" (the keys of (top level): admin, auth,`}},
		{"bad listen", minimal + "server: {listen: nowhere}\n", []string{`server.listen: "nowhere" is not host:port`}},
		{"bad limits", minimal + "server: {maxBatch: -1, maxBodyBytes: 10}\n", []string{"server.maxBatch: must be between 1 and 10000", "server.maxBodyBytes: must be at least 1024"}},
		{"bad level", minimal + "log: {level: loud}\n", []string{`log.level: "loud" is not one of debug, info, warn, error`}},
		{"bad duration", minimal + "server: {readTimeout: soon}\n", []string{`line 9: server.readTimeout: "soon" is not a duration; write it with a unit, e.g. "5s"`}},
		{"no clients", strings.Replace(minimal, "clients: [{id: c1}]", "clients: []", 1), []string{"auth.clients: at least one client id is required"}},
		{"bad url", strings.Replace(minimal, "http://127.0.0.1:1/", "ftp://x", 1), []string{"upstreams.chains[0].urls[0]"}},
		{"second url bad", strings.Replace(minimal, "urls: [http://127.0.0.1:1/]", "urls: [http://127.0.0.1:1/, nope]", 1), []string{"upstreams.chains[0].urls[1]"}},
		{"mainnet not configured", strings.Replace(minimal, "mainnet: 1", "mainnet: 5", 1), []string{"upstreams.mainnet"}},
		{"embedded without devchain", strings.Replace(minimal, "http://127.0.0.1:1/", "embedded", 1), []string{"upstreams.chains[0].urls[0]: embedded needs devchain.enabled: true"}},
		{"debug with devchain", strings.Replace(minimal, "http://127.0.0.1:1/", "embedded", 1) + "devchain: {enabled: true, chainId: 1}\nrouting: {extraNamespaces: [txpool, debug]}\n", []string{"routing.extraNamespaces[1]: debug is refused"}},
		{"bad keys backend", minimal + "wallet: {keys: {backend: postgres}}\n", []string{`wallet.keys.backend: must be "dir" or "store", got "postgres"`}},
		{"bad cluster", minimal + "cluster: {replicaId: 'a b', leaseTimeout: 500ms, leaseCheckInterval: 1s}\n", []string{
			`cluster.replicaId: must be 1 to 63 letters`, "cluster.leaseTimeout: must be at least 1s", "cluster.leaseCheckInterval: must be at most leaseTimeout/4",
		}},
		{"personal namespace", minimal + "routing: {extraNamespaces: [personal]}\n", []string{"routing.extraNamespaces[0]: personal holds signing methods"}},
		{"redis keys", minimal + "redis: {url: 'http://127.0.0.1:6379', timeout: 1m, poolSize: 3}\n", []string{
			"redis.url: the scheme must be redis or rediss", "redis.timeout: must be from 1ms to 5s", "redis.poolSize: must be 0 (one connection per 4 CPUs) or a power of two"}},
		{"admin tokens", minimal + "admin: {tokens: [{sha256: abc}, {name: a, sha256: " + strings.Repeat("1", 64) + "}, {name: a, sha256: " + strings.Repeat("1", 64) + "}]}\n", []string{
			"admin.tokens[0].sha256: must be 64 hex digits (the SHA-256 of the token; web3gate auth hash-token makes it)",
			"admin.tokens[2].sha256: duplicate of tokens[1]", "admin.tokens[2].name: duplicate of tokens[1]"}},
		{"cache without a level", minimal + "cache: {local: false}\n", []string{"cache.local: false needs redis.url"}},
		{"quotas", minimal + "quotas: {enabled: true, flushInterval: 1ms, clients: [{clientId: abc}, {clientId: abc, daily: 5}]}\n", []string{
			"quotas.flushInterval: must be between 10ms and 1h0m0s", "quotas.clients[0]: daily and monthly are both 0", `quotas.clients[1].clientId: "abc" is also clients[0]`}},
		{"quotas without rate limits", minimal + "quotas: {enabled: true}\nrateLimit: {enabled: false}\n", []string{"quotas.enabled: true needs rateLimit.enabled: true"}},
		{"cache entry bound", minimal + "cache: {maxEntryBytes: 100}\n", []string{"cache.maxEntryBytes: must be from 1024 to maxBytes"}},
		{"dev token with real mainnet", strings.Replace(minimal, "clients: [{id: c1}]", "clients: [{id: web3gate-dev}]\n  tokens: [{sha256: b1e46dbebcf3fa8cd6338efbcd8a0e6d8a4efe3e802280151c1bad9eea00a361, principal: dev}]", 1), []string{
			`auth.tokens[0]: the dev token "dev-access-token" is accepted only while the embedded dev chain serves mainnet`,
			`auth.clients[0]: the dev client id "web3gate-dev" is accepted only while the embedded dev chain serves mainnet`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestTokenHashValidation(t *testing.T) {
	_, err := Parse([]byte(strings.Replace(minimal, "clients: [{id: c1}]", "clients: [{id: c1}]\n  tokens: [{sha256: abc, principal: p}, {sha256: "+strings.Repeat("0", 64)+", principal: ''}]", 1)))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v", err)
	}
	want := []string{"auth.tokens[0].sha256: must be 64 hex digits (the SHA-256 of the token)", "auth.tokens[1].principal: must not be empty"}
	if strings.Join(ve.Problems, "|") != strings.Join(want, "|") {
		t.Fatalf("problems %q\nwant %q", ve.Problems, want)
	}
}

func TestMissingFile(t *testing.T) {
	_, err := Load("does-not-exist.yaml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v", err)
	}
}

// TestRateLimitDefaults: rate limits are on by default, with the same budgets as the shipped
// config.yaml states, and explicit false turns them off.
func TestRateLimitDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := Load("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.RateLimit.Enabled || !c.RateLimit.REST.Enabled || c.RateLimit.Replicas != 1 || c.RateLimit.RedisTimeout != 50*time.Millisecond {
		t.Fatalf("rateLimit defaults: %+v", c.RateLimit)
	}
	d, s := c.RateLimit, shipped.RateLimit
	if d.Client != s.Client || d.Principal != s.Principal || d.REST.IP != s.REST.IP || d.REST.Client != s.REST.Client ||
		d.MaxKeys != s.MaxKeys || d.GetLogsBlocksPerUnit != s.GetLogsBlocksPerUnit || d.SubscribeBytesPerUnit != s.SubscribeBytesPerUnit || !s.Enabled || !s.REST.Enabled || len(s.Costs) != 0 ||
		len(shipped.Server.TrustedProxies) != 0 {
		t.Fatalf("config.yaml's rateLimit %+v differs from the defaults %+v", s, d)
	}
	c, err = Parse([]byte(minimal + "rateLimit: {enabled: false, rest: {enabled: false}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimit.Enabled || c.RateLimit.REST.Enabled {
		t.Fatal("explicit false overridden by a default")
	}
	if _, err := Parse([]byte(minimal + "rateLimit: {client: {rate: 0, burst: 3}}\nserver: {trustedProxies: [nope]}\n")); err == nil ||
		!strings.Contains(err.Error(), "rateLimit.client.rate") || !strings.Contains(err.Error(), "server.trustedProxies[0]") {
		t.Fatalf("bad keys: %v", err)
	}
}

// TestExplicitZeroMaxLag: upstreams.maxLag: 0 means only nodes at the best head serve reads;
// it is not replaced by the default as an unset key is.
func TestExplicitZeroMaxLag(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(minimal, "  mainnet: 1\n", "  mainnet: 1\n  maxLag: 0\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if *c.Upstreams.MaxLag != 0 {
		t.Fatalf("maxLag: 0 loaded as %d", *c.Upstreams.MaxLag)
	}
}
