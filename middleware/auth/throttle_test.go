package auth

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: testNow} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testThrottleConfig() ThrottleConfig {
	var c OAuthConfig
	c.SetDefaults()
	return c.Throttle
}

// fail makes n failed attempts of key, each admitted, and returns the lock the last started.
func fail(t *testing.T, th *throttle, key string, n int, now time.Time) time.Duration {
	t.Helper()
	var locked time.Duration
	for i := range n {
		e, wait, ok := th.admit(key, now)
		if !ok {
			t.Fatalf("attempt %d of %d refused (retry after %s)", i+1, n, wait)
		}
		locked = th.done(e, true, false, now)
	}
	return locked
}

func TestThrottleLocksOutAndDoubles(t *testing.T) {
	cfg := testThrottleConfig() // 5 failures a minute, 30s doubling up to 15m
	th := newThrottle(5, cfg)
	now := testNow
	// Four failures lock nothing; the fifth locks the key for 30 s.
	if locked := fail(t, th, "k", 4, now); locked != 0 {
		t.Fatalf("locked %s after 4 failures", locked)
	}
	if locked := fail(t, th, "k", 1, now); locked != 30*time.Second {
		t.Fatalf("the fifth failure locked for %s, want 30s", locked)
	}
	if _, wait, ok := th.admit("k", now.Add(10*time.Second)); ok || wait != 20*time.Second {
		t.Fatalf("admit during the lock = %v, retry after %s; want refused, 20s", ok, wait)
	}
	// Another key is not affected.
	if e, _, ok := th.admit("other", now); !ok {
		t.Fatal("another key was refused")
	} else {
		th.done(e, false, true, now)
	}
	// Each further lock doubles, up to 15 minutes.
	now = testNow
	lock := 30 * time.Second
	for _, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute} {
		now = now.Add(lock) // the previous lock has just ended
		if locked := fail(t, th, "k", 5, now); locked != want {
			t.Fatalf("lock after %s = %s, want %s", lock, locked, want)
		}
		lock = want
	}
	// After maxLockout without a failure (counted from the end of the last lock), locks
	// start again from 30 s.
	now = now.Add(lock + cfg.MaxLockout + time.Second)
	if locked := fail(t, th, "k", 5, now); locked != 30*time.Second {
		t.Fatalf("lock after a quiet period = %s, want 30s", locked)
	}
}

func TestThrottleWindow(t *testing.T) {
	th := newThrottle(5, testThrottleConfig())
	now := testNow
	fail(t, th, "k", 4, now)
	// The failures of a window past are forgotten.
	now = now.Add(time.Minute)
	if locked := fail(t, th, "k", 4, now); locked != 0 {
		t.Fatalf("locked %s: failures of the previous window were counted", locked)
	}
	// A success clears the failures when asked to (the client id's throttle), not otherwise
	// (the address's).
	e, _, _ := th.admit("k", now)
	th.done(e, false, false, now)
	if locked := fail(t, th, "k", 1, now); locked != 30*time.Second {
		t.Fatalf("a success without reset cleared the failures (locked %s)", locked)
	}
	now = now.Add(30 * time.Second)
	fail(t, th, "k", 4, now)
	e, _, _ = th.admit("k", now)
	th.done(e, false, true, now)
	if locked := fail(t, th, "k", 4, now); locked != 0 {
		t.Fatalf("a success with reset kept the failures (locked %s)", locked)
	}
}

// TestThrottleCountsAttemptsInFlight: attempts not yet decided count as failures, so a burst
// of concurrent attempts gets at most max of them checked.
func TestThrottleCountsAttemptsInFlight(t *testing.T) {
	th := newThrottle(5, testThrottleConfig())
	var admitted []*throttleEntry
	for range 5 {
		e, _, ok := th.admit("k", testNow)
		if !ok {
			t.Fatal("refused below the maximum")
		}
		admitted = append(admitted, e)
	}
	if _, wait, ok := th.admit("k", testNow); ok || wait != time.Second {
		t.Fatalf("the sixth concurrent attempt: admitted %v, retry after %s; want refused, 1s", ok, wait)
	}
	// One ends well: room for one more.
	th.done(admitted[0], false, true, testNow)
	e, _, ok := th.admit("k", testNow)
	if !ok {
		t.Fatal("refused after an attempt ended")
	}
	admitted[0] = e
	// The five fail: the fifth failure locks; an attempt admitted before the lock that fails
	// during it neither extends it nor counts after it.
	for i, e := range admitted {
		if locked := th.done(e, true, false, testNow); (locked != 0) != (i == 4) {
			t.Fatalf("failure %d locked %s", i+1, locked)
		}
	}
}

func TestThrottleOffAndEmptyKey(t *testing.T) {
	off := newThrottle(-1, testThrottleConfig())
	on := newThrottle(5, testThrottleConfig())
	for name, tc := range map[string]struct {
		th  *throttle
		key string
	}{"off": {off, "k"}, "empty key": {on, ""}} {
		for i := range 100 {
			e, _, ok := tc.th.admit(tc.key, testNow)
			if !ok {
				t.Fatalf("%s: attempt %d refused", name, i)
			}
			tc.th.done(e, true, false, testNow)
		}
		if n := tc.th.len(); n != 0 {
			t.Fatalf("%s: %d keys held", name, n)
		}
	}
}

// TestThrottleBoundedTable: the table never holds more than maxEntries keys; the least
// recently used goes first, and keys with nothing to remember leave at once.
func TestThrottleBoundedTable(t *testing.T) {
	cfg := testThrottleConfig()
	cfg.MaxEntries = 16
	th := newThrottle(5, cfg)
	for i := range 1001 {
		e, _, ok := th.admit(fmt.Sprint("k", i), testNow)
		if !ok {
			t.Fatalf("key %d refused", i)
		}
		th.done(e, i%2 == 0, false, testNow) // odd keys succeed: nothing to remember
		if n := th.len(); n > 16 {
			t.Fatalf("%d keys held, max 16", n)
		}
	}
	if n := th.len(); n != 16 {
		t.Fatalf("%d keys held, want 16", n)
	}
	// The newest failing keys are held, the oldest dropped.
	th.mu.Lock()
	_, newest := th.entries["k1000"]
	_, oldest := th.entries["k0"]
	th.mu.Unlock()
	if !newest || oldest {
		t.Fatalf("k1000 held %v, k0 held %v; want true, false", newest, oldest)
	}
}

func TestAddressKey(t *testing.T) {
	for _, tc := range []struct {
		addr netip.Addr
		want string
	}{
		{netip.MustParseAddr("192.0.2.7"), "192.0.2.7"},
		{netip.MustParseAddr("::ffff:192.0.2.7"), "192.0.2.7"},
		{netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64"},
		{netip.MustParseAddr("2001:db8:1:2:ffff::1"), "2001:db8:1:2::/64"},
		{netip.Addr{}, ""},
	} {
		if got := addressKey(tc.addr); got != tc.want {
			t.Errorf("addressKey(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestHashGate: with every slot taken, a request waits at most the timeout or until its
// context ends, and one finding the queue full is refused at once.
func TestHashGate(t *testing.T) {
	g := newHashGate(1, 1, time.Hour)
	if err := g.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The slot is taken: a waiter whose context ends gives up.
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- g.acquire(ctx) }()
	for g.queued.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	// The queue (1) is full: refused at once, while the slot is still taken.
	if err := g.acquire(context.Background()); !errors.Is(err, errHashQueueFull) {
		t.Fatalf("acquire with a full queue = %v, want errHashQueueFull", err)
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with its context canceled = %v", err)
	}
	// A waiter that outlives the timeout gives up too.
	short := newHashGate(1, 1, 10*time.Millisecond)
	if err := short.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := short.acquire(context.Background()); !errors.Is(err, errHashQueueTimeout) {
		t.Fatalf("acquire past the timeout = %v, want errHashQueueTimeout", err)
	}
	// A waiter gets the slot when it is released.
	go func() { waited <- g.acquire(context.Background()) }()
	for g.queued.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	g.release()
	if err := <-waited; err != nil {
		t.Fatalf("acquire after release = %v", err)
	}
	if g.queued.Load() != 0 {
		t.Fatalf("%d still queued", g.queued.Load())
	}
}
