package auth

import (
	"container/list"
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// throttle counts the failed client authentications of the token endpoint per key (a client
// id, or a source address) and locks out the keys that keep failing: at most max attempts of
// a key may have failed within the window or still be in progress (each counts as a failure
// until it is known not to be one), and the failure that reaches max locks the key for
// lockout, each further lock twice as long as the one before, up to maxLockout. The table
// holds at most maxEntries keys; when it is full the key used least recently is dropped.
type throttle struct {
	max                         int // 0: off
	window, lockout, maxLockout time.Duration
	maxEntries                  int

	mu      sync.Mutex
	entries map[string]*list.Element // of *throttleEntry
	lru     list.List                // front: used most recently
}

type throttleEntry struct {
	key         string
	windowStart time.Time // failures counts the failures since then
	failures    int
	inflight    int       // attempts admitted and not yet done
	lockedUntil time.Time // kept after the lock ends: it dates the key's last trouble
	locks       int       // locks so far; the next lasts lockout << locks
	lastFailure time.Time
}

// newThrottle builds a throttle of a validated config; max -1 turns it off.
func newThrottle(max int, c ThrottleConfig) *throttle {
	if max < 0 {
		max = 0
	}
	return &throttle{max: max, window: c.Window, lockout: c.Lockout, maxLockout: c.MaxLockout,
		maxEntries: c.MaxEntries, entries: map[string]*list.Element{}}
}

// admit reserves an attempt of key. When the key is locked, or has its maximum of failures
// and attempts in flight, it returns false and how long to wait before trying again. An
// admitted attempt must be ended with done. An empty key, or a throttle that is off, admits
// everything (e is then nil, and done on it does nothing).
func (t *throttle) admit(key string, now time.Time) (e *throttleEntry, retryAfter time.Duration, ok bool) {
	if t.max == 0 || key == "" {
		return nil, 0, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, found := t.entries[key]; found {
		t.lru.MoveToFront(el)
		e = el.Value.(*throttleEntry)
	} else {
		if len(t.entries) >= t.maxEntries {
			t.remove(t.lru.Back())
		}
		e = &throttleEntry{key: key, windowStart: now}
		t.entries[key] = t.lru.PushFront(e)
	}
	if now.Before(e.lockedUntil) {
		return nil, e.lockedUntil.Sub(now), false
	}
	if now.Sub(e.windowStart) >= t.window {
		e.windowStart, e.failures = now, 0
	}
	if e.failures+e.inflight >= t.max {
		// Only attempts in flight can fill it (the failure reaching max locks the key):
		// one of them ends within a verification.
		return nil, time.Second, false
	}
	e.inflight++
	return e, 0, true
}

// done ends an attempt admitted by admit. A failure is counted, and returns how long the key
// is now locked when it is the one that locked it (0 otherwise); a success clears the
// key's failures when reset is set.
func (t *throttle) done(e *throttleEntry, failed, reset bool, now time.Time) (locked time.Duration) {
	if e == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e.inflight--
	if failed {
		quiet := now.Sub(later(e.lastFailure, e.lockedUntil))
		if quiet > t.maxLockout {
			e.locks = 0
		}
		e.lastFailure = now
		if now.Before(e.lockedUntil) {
			return 0 // an attempt admitted before the lock: the lock covers it
		}
		if now.Sub(e.windowStart) >= t.window {
			e.windowStart, e.failures = now, 0
		}
		e.failures++
		if e.failures >= t.max {
			locked = t.lockout
			for i := 0; i < e.locks && locked < t.maxLockout; i++ {
				locked *= 2
			}
			locked = min(locked, t.maxLockout)
			e.lockedUntil = now.Add(locked)
			e.locks++
			// Counting starts again when the lock ends.
			e.windowStart, e.failures = e.lockedUntil, 0
		}
		return locked
	}
	if reset {
		e.failures = 0
	}
	// A key with nothing to remember leaves the table (unless it was dropped already).
	if e.failures == 0 && e.inflight == 0 && e.locks == 0 {
		if el, ok := t.entries[e.key]; ok && el.Value == e {
			t.remove(el)
		}
	}
	return 0
}

func (t *throttle) remove(el *list.Element) {
	if el == nil {
		return
	}
	delete(t.entries, el.Value.(*throttleEntry).key)
	t.lru.Remove(el)
}

// len is the number of keys held.
func (t *throttle) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// addressKey is the throttle key of a source address: an IPv4 address as it is, an IPv6
// address by its /64 (one subscriber's usual allocation, which a client can walk through at
// will). No address (not a TCP peer) is "".
func addressKey(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// hashGate bounds the argon2id verifications running at once and the requests waiting for
// one: a request finding every slot taken waits at most timeout (and no longer than its
// context), and one finding maxQueued requests waiting already is refused at once.
type hashGate struct {
	slots     chan struct{}
	queued    atomic.Int64
	maxQueued int64
	timeout   time.Duration
}

var (
	errHashQueueFull    = errors.New("too many token requests are waiting")
	errHashQueueTimeout = errors.New("no verification slot became free in time")
)

func newHashGate(slots, maxQueued int, timeout time.Duration) *hashGate {
	return &hashGate{slots: make(chan struct{}, slots), maxQueued: int64(maxQueued), timeout: timeout}
}

// acquire takes a slot, to be given back with release.
func (g *hashGate) acquire(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	if g.queued.Add(1) > g.maxQueued {
		g.queued.Add(-1)
		return errHashQueueFull
	}
	defer g.queued.Add(-1)
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-timer.C:
		return errHashQueueTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *hashGate) release() { <-g.slots }
