//go:build linux

package main

import (
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
)

// TestBumpConfig: (k)'s config loads strictly, keeps its state in the run's directory and
// turns bumping on or off as asked, its other settings at their defaults.
func TestBumpConfig(t *testing.T) {
	for _, on := range []bool{true, false} {
		dir := t.TempDir()
		path, err := bumpConfig(dir, "http://127.0.0.1:1", credentials{"c", "t"}, on)(1, 2)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(raw)
		if err != nil {
			t.Fatalf("bumping %v: %v\n%s", on, err, raw)
		}
		b := c.Wallet.Transactions.Bump
		if b.Enabled == nil || *b.Enabled != on || b.After.Blocks != 3 || b.Percent != 12.5 {
			t.Errorf("bumping %v: bump settings %+v, want enabled %v at the defaults (3 blocks, 12.5 %%)", on, b, on)
		}
		if c.Store.Path != filepath.Join(dir, "web3gate.db") || c.Wallet.Keys.Dir != filepath.Join(dir, "keystore") {
			t.Errorf("bumping %v: state outside the run's directory: store %s, keystore %s", on, c.Store.Path, c.Wallet.Keys.Dir)
		}
	}
}

// TestBumpReport: the report gives the time until all were mined only for runs that got
// there, and lists the problems.
func TestBumpReport(t *testing.T) {
	on := &bumpSample{within: bumpSends, allMined: 5 * time.Second, firstMined: 4 * time.Second, blocks: 6, bumps: 200,
		records: bumpRecords{versions: 400, states: map[string]int{"mined": 200}}}
	off := &bumpSample{within: 0, blocks: 60, others: 180, records: bumpRecords{versions: 200, states: map[string]int{"failed": 200}}}
	on.feeCap, on.spike = big.NewInt(2750000000), big.NewInt(27500000000)
	br := &bumpRun{rounds: []map[string]*bumpSample{{"on": on, "off": off}}}
	var w strings.Builder
	br.report(&w, runConfig{})
	out := w.String()
	for _, want := range []string{"all 200 mined after the spike's first block  5.0 s", "bumping off: mined within 1m0s  0 of 200", "failed 200"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GOT ERRORS") {
		t.Errorf("a clean run reported errors:\n%s", out)
	}
	br.problems = []string{"  round 1, bumping on: 3 of web3gate's records not mined"}
	w.Reset()
	br.report(&w, runConfig{})
	if !strings.Contains(w.String(), "GOT ERRORS") || br.failures() == "" {
		t.Errorf("problems not reported:\n%s", w.String())
	}
	if _, err := parseFlags([]string{"-only", "bump"}); err != nil {
		t.Errorf("-only bump: %v", err)
	}
}
