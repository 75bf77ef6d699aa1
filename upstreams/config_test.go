package upstreams

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := Config{Chains: []ChainConfig{
		{ChainID: 1337, Name: "dev", URLs: []string{"embedded"}},
		{ChainID: 1, Name: "ethereum", URLs: []string{"https://a.example/v3/key", "http://user:pw@10.0.0.1:8545"}},
	}}
	c.SetDefaults()
	return c
}

func TestSetDefaults(t *testing.T) {
	c := Config{Chains: []ChainConfig{{ChainID: 137, URLs: []string{"https://p.example"}}, {ChainID: 1, Name: "eth"}}}
	c.SetDefaults()
	want := Config{
		Mainnet:          137,
		Timeout:          10 * time.Second,
		MaxAttempts:      3,
		PollInterval:     time.Second,
		MaxLag:           new(uint64(5)),
		EjectAfter:       3,
		Cooldown:         10 * time.Second,
		MaxResponseBytes: 32 << 20,
		Batch:            BatchConfig{MaxInFlight: 4, MaxSize: 50},
		Hedge:            HedgeConfig{Quantile: 0.9, MinDelay: 10 * time.Millisecond, MaxDelay: 2 * time.Second, MaxExtra: 0.1},
		GetLogs:          GetLogsConfig{MaxRange: 100_000, ChunkSize: 2000, MinChunkSize: 10, RecoverEvery: time.Minute, Concurrency: 4},
		Chains:           []ChainConfig{{ChainID: 137, Name: "137", URLs: []string{"https://p.example"}}, {ChainID: 1, Name: "eth"}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("SetDefaults =\n%+v\nwant\n%+v", c, want)
	}
	if d := DefaultConfig(); d.Timeout != DefaultTimeout || *d.MaxLag != DefaultMaxLag || !d.Batch.Enabled || !d.Hedge.Enabled || d.Chains != nil {
		t.Errorf("DefaultConfig = %+v", d)
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"example", func(*Config) {}},
		{"mainnet a later chain", func(c *Config) { c.Mainnet = 1 }},
		{"ipv6 host", func(c *Config) { c.Chains[1].URLs = []string{"http://[::1]:8545/"} }},
		{"name with dots and dashes", func(c *Config) { c.Chains[1].Name = "eth-main_1.a" }},
		{"ws urls", func(c *Config) { c.Chains[1].WSURLs = []string{"ws://127.0.0.1:8546", "wss://u:p@node.example/ws/key"} }},
		{"64 urls", func(c *Config) {
			c.Chains[1].URLs = nil
			for i := range MaxNodesPerChain {
				c.Chains[1].URLs = append(c.Chains[1].URLs, "http://n"+strings.Repeat("x", i)+".example")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   []string // the messages, in order
	}{
		{"no chains", func(c *Config) { c.Chains = nil; c.Mainnet = 1 },
			[]string{"chains: at least one chain is required"}},
		{"mainnet not configured", func(c *Config) { c.Mainnet = 5 },
			[]string{"mainnet: chain 5 is not configured"}},
		{"bad url", func(c *Config) { c.Chains[1].URLs[0] = "ftp://a.example" },
			[]string{`chains[1].urls[0]: must be an http(s) URL or "embedded"`}},
		{"url without host", func(c *Config) { c.Chains[1].URLs[1] = "https:///rpc" },
			[]string{`chains[1].urls[1]: must be an http(s) URL or "embedded"`}},
		{"not a url", func(c *Config) { c.Chains[0].URLs[0] = "localhost:8545" },
			[]string{`chains[0].urls[0]: must be an http(s) URL or "embedded"`}},
		{"duplicate url", func(c *Config) { c.Chains[1].URLs[1] = c.Chains[1].URLs[0] },
			[]string{"chains[1].urls[1]: duplicate of urls[0]"}},
		{"http url as ws url", func(c *Config) { c.Chains[1].WSURLs = []string{"http://a.example"} },
			[]string{"chains[1].wsUrls[0]: must be a ws(s) URL (scheme must be ws or wss)"}},
		{"duplicate ws url", func(c *Config) { c.Chains[1].WSURLs = []string{"ws://a.example", "ws://a.example"} },
			[]string{"chains[1].wsUrls[1]: duplicate of wsUrls[0]"}},
		{"ws url without host", func(c *Config) { c.Chains[1].WSURLs = []string{"wss:///x"} },
			[]string{"chains[1].wsUrls[0]: must be a ws(s) URL (missing host)"}},
		{"no urls", func(c *Config) { c.Chains[1].URLs = nil },
			[]string{"chains[1].urls: at least one url is required"}},
		{"too many urls", func(c *Config) {
			for i := range MaxNodesPerChain {
				c.Chains[0].URLs = append(c.Chains[0].URLs, "http://n"+strings.Repeat("x", i)+".example")
			}
		}, []string{"chains[0].urls: at most 64 urls per chain"}},
		{"duplicate chain id", func(c *Config) {
			c.Chains = append(c.Chains, ChainConfig{ChainID: 1337, Name: "dev2", URLs: []string{"http://x.example"}})
		}, []string{"chains[2].chainId: duplicate of chains[0]"}},
		{"zero chain id", func(c *Config) { c.Chains[1].ChainID = 0; c.Chains[1].Name = "x" },
			[]string{"chains[1].chainId: must be a positive integer"}},
		{"duplicate name", func(c *Config) { c.Chains[1].Name = "dev" },
			[]string{"chains[1].name: duplicate of chains[0]"}},
		{"empty name", func(c *Config) { c.Chains[1].Name = "" },
			[]string{"chains[1].name: must not be empty"}},
		{"bad name", func(c *Config) { c.Chains[1].Name = "eth main" },
			[]string{"chains[1].name: must be 1 to 64 characters of letters, digits, '.', '_' or '-'"}},
		{"durations and counts", func(c *Config) {
			c.Timeout, c.PollInterval, c.Cooldown = -1, -1, -1
			c.MaxAttempts, c.EjectAfter, c.MaxResponseBytes = -1, -1, 10
		}, []string{
			"timeout: must be a positive duration",
			"pollInterval: must be a positive duration",
			"cooldown: must be a positive duration",
			"maxAttempts: must be between 1 and 100",
			"ejectAfter: must be at least 1",
			"maxResponseBytes: must be at least 1024",
		}},
		{"finality", func(c *Config) { c.Chains[1].Finality, c.Chains[1].FinalityDepth = "safe", 1<<21 }, []string{
			"chains[1].finality: must be auto, tag or depth",
			"chains[1].finalityDepth: must be at most 1048576",
		}},
		{"batch limits", func(c *Config) { c.Batch.MaxInFlight, c.Batch.MaxSize = 0, 1 }, []string{
			"batch.maxInFlight: must be between 1 and 512",
			"batch.maxSize: must be between 2 and 1000",
		}},
		{"hedge bounds", func(c *Config) {
			c.Hedge.Quantile, c.Hedge.MinDelay, c.Hedge.MaxDelay, c.Hedge.MaxExtra = 1, -1, -2, 0
		}, []string{
			"hedge.quantile: must be between 0 and 1 (exclusive)",
			"hedge.minDelay: must be a positive duration",
			"hedge.maxDelay: must not be below hedge.minDelay",
			"hedge.maxExtra: must be above 0 and at most 1",
		}},
		{"hedge delays inverted", func(c *Config) { c.Hedge.MinDelay, c.Hedge.MaxDelay = time.Second, time.Millisecond },
			[]string{"hedge.maxDelay: must not be below hedge.minDelay"}},
		{"getLogs bounds", func(c *Config) {
			c.GetLogs.MaxRange, c.GetLogs.ChunkSize, c.GetLogs.Concurrency = MaxGetLogsRange+1, MaxGetLogsRange+2, 65
		}, []string{
			"getLogs.maxRange: must be between 1 and 100000000",
			"getLogs.chunkSize: must be between 1 and getLogs.maxRange",
			"getLogs.concurrency: must be between 1 and 64",
		}},
		{"getLogs chunk over range", func(c *Config) { c.GetLogs.MaxRange, c.GetLogs.ChunkSize = 100, 101 },
			[]string{"getLogs.chunkSize: must be between 1 and getLogs.maxRange"}},
		{"several chains wrong at once", func(c *Config) {
			c.Chains[0].URLs = nil
			c.Chains[1].URLs[0] = "ws://a.example"
		}, []string{
			"chains[0].urls: at least one url is required",
			`chains[1].urls[0]: must be an http(s) URL or "embedded"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate = nil")
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestValidateNeverEchoesURL(t *testing.T) {
	c := validConfig()
	c.Chains[1].URLs[0] = "ftp://user:s3cr3t@a.example/?key=s3cr3t"
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Validate = %v", err)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c := validConfig()
	c.Mainnet = 99
	if _, err := New(c, Deps{}); err == nil || !strings.Contains(err.Error(), "mainnet: chain 99 is not configured") {
		t.Errorf("New = %v", err)
	}
}
