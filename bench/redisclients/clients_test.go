// Package redisclients compares the two Redis clients web3gate could use, on what web3gate
// asks of Redis: a GET that hits (a cached JSON-RPC result) and a SET with a TTL, against the
// real Redis at 127.0.0.1:6379 (REDIS_ADDR overrides it). It is its own module so that the
// client web3gate does not use stays out of web3gate's go.mod.
//
//	cd bench/redisclients && go test -run '^$' -bench . -benchmem -count 3
//
// serial is one GET at a time (latency); parallel is 32 goroutines per CPU sharing one client
// (throughput under load, as web3gate's connections share one client).
package redisclients

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func addr() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// getter is one client's GET and SET.
type getter interface {
	get(ctx context.Context, key string) ([]byte, error)
	set(ctx context.Context, key string, v []byte, ttl time.Duration) error
	del(ctx context.Context, keys ...string) error
	close()
}

type goRedis struct{ c *redis.Client }

func (g goRedis) get(ctx context.Context, k string) ([]byte, error) { return g.c.Get(ctx, k).Bytes() }
func (g goRedis) set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	return g.c.Set(ctx, k, v, ttl).Err()
}
func (g goRedis) del(ctx context.Context, keys ...string) error { return g.c.Del(ctx, keys...).Err() }
func (g goRedis) close()                                        { _ = g.c.Close() }

type rueidisClient struct{ c rueidis.Client }

func (r rueidisClient) get(ctx context.Context, k string) ([]byte, error) {
	return r.c.Do(ctx, r.c.B().Get().Key(k).Build()).AsBytes()
}
func (r rueidisClient) set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	return r.c.Do(ctx, r.c.B().Set().Key(k).Value(rueidis.BinaryString(v)).Px(ttl).Build()).Error()
}
func (r rueidisClient) del(ctx context.Context, keys ...string) error {
	return r.c.Do(ctx, r.c.B().Del().Key(keys...).Build()).Error()
}
func (r rueidisClient) close() { r.c.Close() }

func clients(b *testing.B) map[string]getter {
	g := redis.NewClient(&redis.Options{Addr: addr(), PoolSize: 64, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
		ContextTimeoutEnabled: true})
	r, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]getter{"go-redis": goRedis{g}, "rueidis": rueidisClient{r}}
}

func prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bench-redisclients-" + hex.EncodeToString(b[:]) + ":"
}

// BenchmarkGetHit measures a GET of a value that is there, 1 KiB (a receipt) and 16 KiB (a
// block with its transaction hashes), each under a 50 ms deadline as web3gate sets one.
func BenchmarkGetHit(b *testing.B) {
	cs := clients(b)
	for _, name := range []string{"go-redis", "rueidis"} {
		c := cs[name]
		defer c.close()
		for _, size := range []int{1 << 10, 16 << 10} {
			key := prefix() + "v"
			val := []byte(strings.Repeat("x", size))
			if err := c.set(context.Background(), key, val, time.Minute); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.del(context.Background(), key) })
			var late atomic.Int64
			one := func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				v, err := c.get(ctx, key)
				cancel()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					late.Add(1) // the machine is shared: counted, not fatal
				case err != nil || len(v) != size:
					b.Fatalf("get: %d bytes, %v", len(v), err)
				}
			}
			sz := map[int]string{1 << 10: "1KiB", 16 << 10: "16KiB"}[size]
			b.Run(name+"/serial/"+sz, func(b *testing.B) {
				b.ReportAllocs()
				late.Store(0)
				cpu := cpuTime()
				for b.Loop() {
					one(b)
				}
				report(b, cpu, &late)
			})
			b.Run(name+"/parallel/"+sz, func(b *testing.B) {
				b.ReportAllocs()
				late.Store(0)
				cpu := cpuTime()
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one(b)
					}
				})
				report(b, cpu, &late)
			})
		}
	}
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds the client's CPU per GET (what the client costs web3gate, whatever the
// machine's other load) and the GETs that missed their 50 ms deadline.
func report(b *testing.B, cpu0 time.Duration, late *atomic.Int64) {
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(late.Load()), "late")
}

// BenchmarkSet measures a SET with a TTL of a 1 KiB value (a cache fill).
func BenchmarkSet(b *testing.B) {
	cs := clients(b)
	for _, name := range []string{"go-redis", "rueidis"} {
		c := cs[name]
		defer c.close()
		key := prefix() + "s"
		b.Cleanup(func() { _ = c.del(context.Background(), key) })
		val := []byte(strings.Repeat("x", 1<<10))
		b.Run(name+"/parallel/1KiB", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					err := c.set(ctx, key, val, time.Minute)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
