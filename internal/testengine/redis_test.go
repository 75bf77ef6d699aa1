package testengine

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedis: the keys a test writes under its prefix are gone after it, more than one SCAN
// page of them; a key outside the prefix is left alone; two tests get different prefixes.
func TestRedis(t *testing.T) {
	ctx := context.Background()
	addr := RedisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	outside := "w3g_test_outside:" + randomHex(8)
	if err := c.Set(ctx, outside, "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Del(ctx, outside)

	const n = 2500
	var prefixes []string
	for i := range 2 {
		t.Run(fmt.Sprint("use", i), func(t *testing.T) {
			gotAddr, prefix := Redis(t)
			if gotAddr != addr {
				t.Fatalf("addr %q, want %q", gotAddr, addr)
			}
			prefixes = append(prefixes, prefix)
			pipe := c.Pipeline()
			for k := range n {
				pipe.Set(ctx, fmt.Sprintf("%s%d", prefix, k), k, 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if got := countKeys(t, c, prefix); got != n {
				t.Fatalf("%d keys under %s, want %d", got, prefix, n)
			}
		})
	}
	if len(prefixes) != 2 || prefixes[0] == prefixes[1] {
		t.Fatalf("prefixes %q: want two different ones", prefixes)
	}
	for _, p := range prefixes {
		if got := countKeys(t, c, p); got != 0 {
			t.Errorf("%d keys under %s after its test, want 0", got, p)
		}
	}
	if v, err := c.Get(ctx, outside).Result(); err != nil || v != "kept" {
		t.Errorf("key outside the prefixes: %q, %v; want it kept", v, err)
	}
}

func countKeys(t *testing.T, c *redis.Client, prefix string) int {
	t.Helper()
	n := 0
	iter := c.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine, as
// the real one does, so that a test can check what Redis says when it fails.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestRedisUnreachable: no Redis at WEB3GATE_TEST_REDIS fails the test with the address and
// what to do, instead of skipping it.
func TestRedisUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	t.Setenv("WEB3GATE_TEST_REDIS", closed)

	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Redis(rec)
		t.Error("Redis returned with no Redis at its address")
	}()
	<-done
	for _, want := range []string{"Redis at " + closed + " is not reachable", "WEB3GATE_TEST_REDIS", "make test"} {
		if !strings.Contains(rec.msg, want) {
			t.Errorf("failure %q does not say %q", rec.msg, want)
		}
	}
}
