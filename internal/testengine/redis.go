package testengine

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAddr is the host:port of the test Redis: WEB3GATE_TEST_REDIS, or 127.0.0.1:6379.
func RedisAddr() string {
	if s := os.Getenv("WEB3GATE_TEST_REDIS"); s != "" {
		return s
	}
	return "127.0.0.1:6379"
}

// Redis checks that the test Redis answers PING and returns its address and a key prefix of
// t's own ("w3g_test:<random>:"). When t ends, every key under the prefix is deleted (SCAN
// MATCH prefix* and DEL): the server may be shared, so nothing else is touched, never
// FLUSHDB. An unreachable Redis fails t.
func Redis(t testing.TB) (addr, prefix string) {
	t.Helper()
	addr = RedisAddr()
	c := newRedisClient(addr)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testengine: Redis at %s is not reachable (run the tests through `make test`, which starts one, or set WEB3GATE_TEST_REDIS to host:port): %v", addr, err)
	}
	prefix = "w3g_test:" + randomHex(8) + ":"
	t.Cleanup(func() { deleteRedisKeys(t, addr, prefix) })
	return addr, prefix
}

func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
		MaxRetries:   1,
		PoolSize:     1,
	})
}

// deleteRedisKeys deletes every key whose name starts with prefix (which holds no glob
// characters).
func deleteRedisKeys(t testing.TB, addr, prefix string) {
	c := newRedisClient(addr)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			t.Errorf("testengine: delete Redis keys %s*: scan: %v", prefix, err)
			return
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("testengine: delete Redis keys %s*: %v", prefix, err)
				return
			}
		}
		if next == 0 {
			return
		}
		cursor = next
	}
}
