package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// The budgets are GCRA (the generic cell rate algorithm, a token bucket kept as one time per
// key): a key's state is its theoretical arrival time (TAT). A budget of rate units per
// second and a burst spends interval = 1/rate per unit; a charge of n units is allowed when
// TAT + n·interval − burst·interval ≤ now, and then moves TAT there (from now, when TAT is
// past). A key whose TAT is past holds a full bucket: it is the same as no key, so the local
// limiter drops such keys freely.

// budget is a compiled Rate.
type budget struct {
	interval float64 // nanoseconds per unit
	tau      float64 // burst·interval
	burst    uint64
}

func newBudget(r Rate, share int) budget {
	rate, burst := r.Rate/float64(share), r.Burst/uint64(share)
	burst = max(burst, 1)
	iv := 1e9 / rate
	return budget{interval: iv, tau: float64(burst) * iv, burst: burst}
}

// verdict is the outcome of a charge, reported for the tightest budget charged.
type verdict struct {
	ok         bool
	limit      uint64
	remaining  uint64
	reset      time.Duration // until the bucket is full again
	retryAfter time.Duration // refused: until the charge would be allowed
}

// report folds budget b, with TAT tat after the charge (or, refused, without it), into v: the
// budget with the fewest units left is the one reported.
func (v *verdict) report(first bool, b *budget, tat, now int64) {
	left := (float64(now) + b.tau - float64(tat)) / b.interval
	rem := uint64(0)
	if left > 0 {
		rem = uint64(math.Floor(left + 1e-9))
	}
	rem = min(rem, b.burst)
	if first || rem < v.remaining {
		v.limit, v.remaining = b.burst, rem
		v.reset = time.Duration(max(tat-now, 0))
	}
}

// table is the local limiter's TATs of one kind of key, in shards, at most max keys in all.
type table[K comparable] struct {
	seed   maphash.Seed
	hash   func(maphash.Seed, K) uint64
	clone  func(K) K
	max    int // per shard
	shards [nShards]shard[K]
}

const nShards = 16

type shard[K comparable] struct {
	mu sync.Mutex
	m  map[K]int64
	_  [40]byte // a cache line each
}

func newTable[K comparable](maxKeys int, hash func(maphash.Seed, K) uint64, clone func(K) K) *table[K] {
	t := &table[K]{seed: maphash.MakeSeed(), hash: hash, clone: clone, max: max(1, maxKeys/nShards)}
	for i := range t.shards {
		t.shards[i].m = make(map[K]int64)
	}
	return t
}

func (t *table[K]) shard(k K) *shard[K] { return &t.shards[t.hash(t.seed, k)%nShards] }

// len is the number of keys held.
func (t *table[K]) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// evictSample is how many keys a full shard looks at to make room.
const evictSample = 32

// put sets k's TAT (the shard is locked; held: k is in it). A new key in a full shard first drops the keys with
// a full bucket among a sample; when none is, the sampled key closest to a full bucket goes
// (it is then treated as full: the limit errs towards allowing, for that key only).
func (s *shard[K]) put(t *table[K], k K, tat, now int64, held bool) {
	if held {
		s.m[k] = tat
		return
	}
	if len(s.m) >= t.max {
		var oldest K
		oldestTAT := int64(math.MaxInt64)
		dropped, seen := 0, 0
		for key, v := range s.m {
			if v <= now {
				delete(s.m, key)
				dropped++
			} else if v < oldestTAT {
				oldest, oldestTAT = key, v
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if dropped == 0 && oldestTAT != math.MaxInt64 {
			delete(s.m, oldest)
		}
	}
	s.m[t.clone(k)] = tat
}

// charge is one budget of a charge: its table entry and its cost.
type charge[K comparable] struct {
	t    *table[K]
	key  K
	b    *budget
	cost uint64
}

// take charges c (and d, when d.t is set) cost units at now, both or neither. Shards are
// locked in the order of the arguments; callers pass tables in one fixed order.
func take[K1, K2 comparable](now int64, c charge[K1], d charge[K2]) verdict {
	s1 := c.t.shard(c.key)
	s1.mu.Lock()
	defer s1.mu.Unlock()
	var s2 *shard[K2]
	if d.t != nil {
		s2 = d.t.shard(d.key)
		s2.mu.Lock()
		defer s2.mu.Unlock()
	}
	old1, held1 := s1.m[c.key]
	tat1, ok1, wait1 := gcra(old1, now, c.b, c.cost)
	var old2, tat2 int64
	held2, ok2, wait2 := false, true, int64(0)
	if s2 != nil {
		old2, held2 = s2.m[d.key]
		tat2, ok2, wait2 = gcra(old2, now, d.b, d.cost)
	}
	v := verdict{ok: ok1 && ok2}
	if !v.ok {
		v.retryAfter = time.Duration(max(wait1, wait2))
		v.report(true, c.b, max(old1, now), now)
		if s2 != nil {
			v.report(false, d.b, max(old2, now), now)
		}
		return v
	}
	if c.cost > 0 {
		s1.put(c.t, c.key, tat1, now, held1)
	}
	if s2 != nil && d.cost > 0 {
		s2.put(d.t, d.key, tat2, now, held2)
	}
	v.report(true, c.b, tat1, now)
	if s2 != nil {
		v.report(false, d.b, tat2, now)
	}
	return v
}

// gcra returns the TAT after a charge of cost (capped at the burst: a charge larger than the
// bucket passes only when it is full) on a key with TAT tat, whether it is allowed, and, if not,
// how long until it would be.
func gcra(tat, now int64, b *budget, cost uint64) (newTAT int64, ok bool, wait int64) {
	tat = max(tat, now)
	newTAT = tat + int64(float64(min(cost, b.burst))*b.interval)
	allowAt := newTAT - int64(b.tau)
	if allowAt > now {
		return tat, false, allowAt - now
	}
	return newTAT, true, 0
}

func hashString(seed maphash.Seed, s string) uint64 { return maphash.String(seed, s) }
