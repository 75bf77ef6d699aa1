//go:build linux

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/config"
)

// TestOwnersConfig: the generated configuration of (i) and (o) loads, and indexes the anvil
// chain as the measurement says.
func TestOwnersConfig(t *testing.T) {
	dir := t.TempDir()
	cred, err := newCredentials()
	if err != nil {
		t.Fatal(err)
	}
	path, err := ownersConfig(dir, "http://127.0.0.1:1", cred, "info")(1, 2)
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
	if len(c.Owners.Chains) != 1 || c.Owners.Chains[0].ChainID != anvilChainID || *c.Owners.Chains[0].Confirmations != 0 ||
		c.Owners.Chains[0].MaxBlockRange != ownersBlockRange || c.Devchain.Enabled || !strings.HasPrefix(c.Store.Path, dir) {
		t.Fatalf("config: %+v", c.Owners)
	}
	if o, err := parseFlags([]string{"-only", "owners"}); err != nil || o.only != "owners" {
		t.Errorf("-only owners: %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-only", "owners", "-forwarder"}); err == nil || !strings.Contains(err.Error(), "-only owners") {
		t.Errorf("-only owners -forwarder: %v", err)
	}
}

// TestOwnersMix: the mix weighs every kind of query the same and leaves the asides out, and
// the generated chain is the documented one.
func TestOwnersMix(t *testing.T) {
	g := getSuite{cases: []getCase{{key: "a", paths: []string{"a1", "a2", "a3"}}, {key: "x", paths: []string{"x1"}, aside: true},
		{key: "b", paths: []string{"b1"}}}}
	if got := strings.Join(interleave(g.mixCases()), " "); got != "a1 b1 a2 b1 a3 b1" {
		t.Fatalf("mix = %s", got)
	}
	if got := g.mixName(); got != "mix of (a)-(b)" {
		t.Errorf("mix name = %s", got)
	}
	if ownersLogs != 955_000 || ownersTransfers != 1_000_000 {
		t.Fatalf("the generated chain holds %d transfers in %d logs, not the documented 1,000,000 in 955,000", ownersTransfers, ownersLogs)
	}
}
