//go:build linux

package main

import (
	"os"
	"testing"

	"github.com/web3gate/web3gate/config"
)

// TestLimitedConfig: (l)'s config is the shipped one with the stage on, eth_chainId charged a
// unit and budgets a load never spends; (b)'s has every rate limit off.
func TestLimitedConfig(t *testing.T) {
	dir := t.TempDir()
	load := func(mk func(root, dir string) func(api, admin int) (string, error)) *config.Config {
		t.Helper()
		path, err := mk("..", dir)(1, 2)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	l := load(limitedConfig)
	if !l.RateLimit.Enabled || l.RateLimit.REST.Enabled || l.RateLimit.Costs["eth_chainId"] != 1 ||
		l.RateLimit.Client.Rate != 1e9 || l.RateLimit.Client.Burst != 1e9 || l.RateLimit.Principal.Burst != 1e9 {
		t.Fatalf("(l): %+v", l.RateLimit)
	}
	b := load(devConfig)
	if b.RateLimit.Enabled || b.RateLimit.REST.Enabled {
		t.Fatalf("(b): %+v", b.RateLimit)
	}
}
