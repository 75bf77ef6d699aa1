package lazycache

import (
	"runtime"
	"testing"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/web3gate/web3gate/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func config() *ristretto.Config[string, []byte] {
	return &ristretto.Config[string, []byte]{NumCounters: 1000, MaxCost: 1 << 20, BufferItems: 64}
}

func TestNotBuiltUntilWritten(t *testing.T) {
	before := runtime.NumGoroutine()
	c, err := New(config())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("k"); ok {
		t.Fatal("Get on a cache never written: a hit")
	}
	c.Del("k")
	c.Wait()
	if c.Built() {
		t.Fatal("Get, Del and Wait built the cache")
	}
	if n := runtime.NumGoroutine(); n != before {
		t.Fatalf("goroutines: %d before New, %d after, with nothing written", before, n)
	}
	if !c.Set("k", []byte("v"), 1) {
		t.Fatal("the first Set was dropped")
	}
	c.Wait()
	if !c.Built() {
		t.Fatal("Set did not build the cache")
	}
	if v, ok := c.Get("k"); !ok || string(v) != "v" {
		t.Fatalf("Get after Set = %q, %v", v, ok)
	}
	c.Del("k")
	c.Wait()
	if _, ok := c.Get("k"); ok {
		t.Fatal("Get after Del: a hit")
	}
	if !c.SetWithTTL("t", []byte("w"), 1, time.Hour) {
		t.Fatal("SetWithTTL was dropped")
	}
	c.Wait()
	if v, ok := c.Get("t"); !ok || string(v) != "w" {
		t.Fatalf("Get after SetWithTTL = %q, %v", v, ok)
	}
	c.Clear()
	if _, ok := c.Get("t"); ok {
		t.Fatal("Get after Clear: a hit")
	}
	c.Close()
	leaktest.Check(t)
}

// A cache closed before any write is never built: its goroutines would outlive Close.
func TestClosedNeverBuilds(t *testing.T) {
	c, err := New(config())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c.Set("k", []byte("v"), 1) || c.SetWithTTL("k", []byte("v"), 1, time.Hour) {
		t.Fatal("a write after Close was accepted")
	}
	if c.Built() {
		t.Fatal("a write after Close built the cache")
	}
	leaktest.Check(t)
}

func TestNewRefusesWhatRistrettoRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ristretto.Config[string, []byte]
	}{
		{"no counters", ristretto.Config[string, []byte]{MaxCost: 1, BufferItems: 64}},
		{"negative counters", ristretto.Config[string, []byte]{NumCounters: -1, MaxCost: 1, BufferItems: 64}},
		{"no cost", ristretto.Config[string, []byte]{NumCounters: 10, BufferItems: 64}},
		{"no buffer", ristretto.Config[string, []byte]{NumCounters: 10, MaxCost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if _, err := New(&cfg); err == nil {
				t.Fatal("New accepted it")
			}
			cfg = tc.cfg
			if _, err := ristretto.NewCache(&cfg); err == nil {
				t.Fatal("ristretto accepts it: the check is stricter than ristretto's")
			}
		})
	}
}
