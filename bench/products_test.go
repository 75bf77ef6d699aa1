//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/products"
)

// TestWriteCatalog: the generated catalog is one `web3gate products import` accepts, with
// the spread the measurement describes.
func TestWriteCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if _, err := writeCatalog(path, 2000, now); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := products.ParseFile(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	var soldOut, upcoming, unscheduled int
	for _, p := range ps {
		types[p.SaleType]++
		if p.TotalAvailable != nil && p.TotalSold >= *p.TotalAvailable {
			soldOut++
		}
		switch {
		case p.LiveAt == nil:
			unscheduled++
		case p.LiveAt.After(now):
			upcoming++
		}
	}
	if len(ps) != 2000 || len(types) != 4 || soldOut < 100 || upcoming < 40 || unscheduled < 10 {
		t.Errorf("%d products, types %v, sold out %d, upcoming %d, never scheduled %d", len(ps), types, soldOut, upcoming, unscheduled)
	}
}

func TestProductsFlagsAndMix(t *testing.T) {
	if o, err := parseFlags([]string{"-only", "products"}); err != nil || o.only != "products" {
		t.Errorf("-only products: %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-only", "products", "-forwarder"}); err == nil || !strings.Contains(err.Error(), "-only products") {
		t.Errorf("-only products -forwarder: %v", err)
	}
	cases := productCases()
	mix := interleave(cases)
	count := map[string]int{}
	for _, p := range mix {
		for _, pc := range cases {
			for _, q := range pc.paths {
				if p == q {
					count[pc.key]++
				}
			}
		}
	}
	for _, pc := range cases {
		if count[pc.key] != len(mix)/len(cases) {
			t.Errorf("(%s) has %d of the mix's %d URLs, want an equal share", pc.key, count[pc.key], len(mix))
		}
	}
}
