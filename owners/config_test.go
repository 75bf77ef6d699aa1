package owners

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/upstreams"
)

var testUpstreams = []upstreams.ChainConfig{{ChainID: 1}, {ChainID: 1337}}

func TestConfigDefaults(t *testing.T) {
	c := Config{Chains: []ChainConfig{{ChainID: 1}}}
	c.SetDefaults()
	ch := c.Chains[0]
	if c.MetadataConcurrency != 8 || *ch.Confirmations != 12 || ch.MaxBlockRange != 2000 || ch.PollInterval != 2*time.Second ||
		ch.ProgressLogInterval != 30*time.Second || ch.ReorgDepth != 64 || ch.RequestTimeout != 30*time.Second || ch.StartBlock != 0 {
		t.Fatalf("defaults = %+v %+v", c, ch)
	}
	if err := c.Validate(testUpstreams); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	zero := uint64(0)
	c = Config{Chains: []ChainConfig{{ChainID: 1, Confirmations: &zero}}}
	c.SetDefaults()
	if *c.Chains[0].Confirmations != 0 {
		t.Fatal("an explicit confirmations: 0 was replaced by the default")
	}
	var empty Config
	empty.SetDefaults()
	if err := empty.Validate(nil); err != nil {
		t.Fatalf("no chains: %v", err)
	}
}

func TestConfigRejects(t *testing.T) {
	big := uint64(20000)
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"chain not an upstream", func(c *Config) { c.Chains[0].ChainID = 137 }, "chains[0].chainId: chain 137 is not under upstreams.chains"},
		{"chain zero", func(c *Config) { c.Chains[0].ChainID = 0 }, "chains[0].chainId: must be a positive integer"},
		{"duplicate chain", func(c *Config) { c.Chains = append(c.Chains, c.Chains[0]) }, "chains[1].chainId: duplicate of chains[0]"},
		{"bad contract", func(c *Config) { c.Chains[0].Contracts = []string{"0x12"} }, "chains[0].contracts[0]: must be a 0x-prefixed 20-byte hex address"},
		{"bad checksum", func(c *Config) {
			c.Chains[0].Contracts = []string{"0x384Dd1056b31ab9c648c5f9bd842b242747eb65d"}
		}, "chains[0].contracts[0]: mixed-case address with an invalid EIP-55 checksum"},
		{"duplicate contract", func(c *Config) {
			c.Chains[0].Contracts = []string{"0x384dd1056b31ab9c648c5f9bd842b242747eb65d", "0x384DD1056B31AB9C648C5F9BD842B242747EB65D"}
		}, "chains[0].contracts[1]: duplicate of contracts[0]"},
		{"too many contracts", func(c *Config) { c.Chains[0].Contracts = make([]string, MaxContracts+1) }, "chains[0].contracts: at most 1000 contracts"},
		{"confirmations", func(c *Config) { c.Chains[0].Confirmations = &big }, "chains[0].confirmations: must be between 0 and 10000"},
		{"maxBlockRange", func(c *Config) { c.Chains[0].MaxBlockRange = MaxBlockRangeLimit + 1 }, "chains[0].maxBlockRange: must be between 1 and 1000000"},
		{"pollInterval", func(c *Config) { c.Chains[0].PollInterval = time.Millisecond }, "chains[0].pollInterval: must be at least 10ms"},
		{"progressLogInterval", func(c *Config) { c.Chains[0].ProgressLogInterval = time.Millisecond }, "chains[0].progressLogInterval: must be at least 1s"},
		{"reorgDepth", func(c *Config) { c.Chains[0].ReorgDepth = MaxReorgDepth + 1 }, "chains[0].reorgDepth: must be between 1 and 100000"},
		{"requestTimeout", func(c *Config) { c.Chains[0].RequestTimeout = time.Millisecond }, "chains[0].requestTimeout: must be at least 100ms"},
		{"metadataConcurrency", func(c *Config) { c.MetadataConcurrency = 65 }, "metadataConcurrency: must be between 1 and 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Chains: []ChainConfig{{ChainID: 1337}}}
			cfg.SetDefaults()
			c.edit(&cfg)
			err := cfg.Validate(testUpstreams)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want %q", err, c.want)
			}
		})
	}
}

func TestScope(t *testing.T) {
	c := Config{Chains: []ChainConfig{
		{ChainID: 1},
		{ChainID: 1337, Contracts: []string{"0x9DD2210AC16D02E99353F9D3A2437BF9217BBFC5", "0x384dd1056b31ab9c648c5f9bd842b242747eb65d"}},
	}}
	c.SetDefaults()
	got := c.Scope()
	want := map[uint64][]string{1: {}, 1337: {"0x384dd1056b31ab9c648c5f9bd842b242747eb65d", "0x9dd2210ac16d02e99353f9d3a2437bf9217bbfc5"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Scope = %v, want %v", got, want)
	}
	// The stored scope of an index changes with the start block and the contracts only.
	a, b := c.Chains[1], c.Chains[1]
	b.MaxBlockRange, b.PollInterval = 7, time.Minute
	if a.scope() != b.scope() {
		t.Errorf("scope changed with settings that do not change the index")
	}
	b.StartBlock = 5
	if a.scope() == b.scope() {
		t.Errorf("scope did not change with startBlock")
	}
}
