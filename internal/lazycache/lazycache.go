// Package lazycache is a ristretto cache that is built at its first write. ristretto allocates
// its admission counters up front (about 5 % of MaxCost at web3gate's sizing: 3.4 MiB for the
// 64 MiB response cache) and starts two goroutines; a cache nothing was written to, such as
// the metadata cache of a gateway whose /v1/tokens routes are never asked, holds none of
// that. Reads before the first write are misses, as they would be on an empty cache.
package lazycache

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// Cache is a ristretto cache built at the first Set; safe for concurrent use.
type Cache[K ristretto.Key, V any] struct {
	cfg ristretto.Config[K, V]
	c   atomic.Pointer[ristretto.Cache[K, V]]

	mu     sync.Mutex // held while building and closing
	closed bool
}

// New checks cfg as ristretto.NewCache would, so that a bad size fails at start rather than at
// the first write, and returns the cache, not built yet.
func New[K ristretto.Key, V any](cfg *ristretto.Config[K, V]) (*Cache[K, V], error) {
	switch {
	case cfg.NumCounters <= 0:
		return nil, errors.New("cache: NumCounters must be positive")
	case cfg.MaxCost <= 0:
		return nil, errors.New("cache: MaxCost must be positive")
	case cfg.BufferItems <= 0:
		return nil, errors.New("cache: BufferItems must be positive")
	}
	return &Cache[K, V]{cfg: *cfg}, nil
}

// Built reports whether the cache has been built (something was written to it).
func (l *Cache[K, V]) Built() bool { return l.c.Load() != nil }

// build returns the ristretto cache, building it on the first call; nil once closed.
func (l *Cache[K, V]) build() *ristretto.Cache[K, V] {
	if c := l.c.Load(); c != nil {
		return c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if c := l.c.Load(); c != nil {
		return c
	}
	cfg := l.cfg // ristretto may fill in defaults
	c, err := ristretto.NewCache(&cfg)
	if err != nil {
		return nil // New checked every condition NewCache refuses
	}
	l.c.Store(c)
	return c
}

// Get returns the value of key; before the first write, a miss.
func (l *Cache[K, V]) Get(key K) (V, bool) {
	if c := l.c.Load(); c != nil {
		return c.Get(key)
	}
	var zero V
	return zero, false
}

// Set is ristretto's Set; it builds the cache first if need be. False: dropped, or closed.
func (l *Cache[K, V]) Set(key K, value V, cost int64) bool {
	c := l.build()
	return c != nil && c.Set(key, value, cost)
}

// SetWithTTL is ristretto's SetWithTTL; it builds the cache first if need be.
func (l *Cache[K, V]) SetWithTTL(key K, value V, cost int64, ttl time.Duration) bool {
	c := l.build()
	return c != nil && c.SetWithTTL(key, value, cost, ttl)
}

// Del removes key; before the first write there is nothing to remove.
func (l *Cache[K, V]) Del(key K) {
	if c := l.c.Load(); c != nil {
		c.Del(key)
	}
}

// Clear empties the cache.
func (l *Cache[K, V]) Clear() {
	if c := l.c.Load(); c != nil {
		c.Clear()
	}
}

// Wait blocks until the buffered writes are applied.
func (l *Cache[K, V]) Wait() {
	if c := l.c.Load(); c != nil {
		c.Wait()
	}
}

// Close stops the cache's goroutines and frees it; later writes are dropped.
func (l *Cache[K, V]) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if c := l.c.Load(); c != nil {
		c.Close()
	}
}
