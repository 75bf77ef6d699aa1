package devchain

import (
	"strings"
	"testing"
	"time"
)

func TestConfigSetDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	want := Config{ChainID: 1337, Accounts: 10, BalanceEther: 10000, GasLimit: 30_000_000}
	if c != want {
		t.Fatalf("SetDefaults() = %+v, want %+v", c, want)
	}
}

func TestConfigSetDefaultsKeepsSetFields(t *testing.T) {
	c := Config{Enabled: true, ChainID: 137, Accounts: 3, BalanceEther: 5, GasLimit: 21000}
	want := c
	c.SetDefaults()
	if c != want {
		t.Fatalf("SetDefaults() = %+v, want %+v", c, want)
	}
}

func TestConfigValidateAcceptsDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
}

func TestConfigValidateRejects(t *testing.T) {
	valid := func() Config { c := Config{}; c.SetDefaults(); return c }
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // one line of the joined error each, in order
	}{
		{"zero chain id", func(c *Config) { c.ChainID = 0 }, []string{"chainId: must be > 0"}},
		{"chain id above EIP-2294", func(c *Config) { c.ChainID = MaxChainID + 1 }, []string{"chainId: must be at most 9223372036854775771 (EIP-2294)"}},
		{"no accounts", func(c *Config) { c.Accounts = 0 }, []string{"accounts: must be between 1 and 1000"}},
		{"negative accounts", func(c *Config) { c.Accounts = -1 }, []string{"accounts: must be between 1 and 1000"}},
		{"too many accounts", func(c *Config) { c.Accounts = 1001 }, []string{"accounts: must be between 1 and 1000"}},
		{"zero balance", func(c *Config) { c.BalanceEther = 0 }, []string{"balanceEther: must be > 0"}},
		{"gas limit below a transfer", func(c *Config) { c.GasLimit = 20999 }, []string{"gasLimit: must be between 21000 and 9223372036854775807"}},
		{"gas limit above int64", func(c *Config) { c.GasLimit = 1 << 63 }, []string{"gasLimit: must be between 21000 and 9223372036854775807"}},
		{"negative burst block interval", func(c *Config) { c.BurstBlockInterval = -time.Millisecond }, []string{"burstBlockInterval: must be between 0 and 10s"}},
		{"burst block interval above 10s", func(c *Config) { c.BurstBlockInterval = 10*time.Second + 1 }, []string{"burstBlockInterval: must be between 0 and 10s"}},
		{"everything unset", func(c *Config) { *c = Config{} }, []string{
			"chainId: must be > 0",
			"accounts: must be between 1 and 1000",
			"balanceEther: must be > 0",
			"gasLimit: must be between 21000 and 9223372036854775807",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfigValidateAcceptsBounds(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"smallest", Config{ChainID: 1, Accounts: 1, BalanceEther: 1, GasLimit: 21000}},
		{"largest", Config{ChainID: MaxChainID, Accounts: 1000, BalanceEther: 1<<64 - 1, GasLimit: 1<<63 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}
