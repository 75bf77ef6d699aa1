package testengine

import (
	"testing"
	"time"
)

// TestRedis: the keys under a test's prefix exist while it runs and are gone after; keys
// outside it are left alone.
func TestRedis(t *testing.T) {
	var prefix string
	outside := "w3g-testengine-outside-" + randomHex(4)
	if _, err := RedisCommand(RedisAddr(), "SET", outside, "x", "EX", "60"); err != nil {
		t.Fatal(err)
	}
	defer RedisCommand(RedisAddr(), "DEL", outside)
	t.Run("use", func(t *testing.T) {
		_, prefix = Redis(t)
		for _, k := range []string{"a", "b:c"} {
			if _, err := RedisCommand(RedisAddr(), "SET", prefix+k, "v"); err != nil {
				t.Fatal(err)
			}
		}
	})
	if keys, err := RedisKeys(RedisAddr(), prefix); err != nil || len(keys) != 0 {
		t.Fatalf("left after the test: %v %v", keys, err)
	}
	if line, err := RedisCommand(RedisAddr(), "EXISTS", outside); err != nil || line != ":1" {
		t.Fatalf("a key outside the prefix: %q %v", line, err)
	}
	if err := DeleteRedisPrefix(RedisAddr(), "w3g:"); err == nil {
		t.Fatal("a broad prefix was accepted for deletion")
	}
}

// TestPrivateRedis: killed, it answers nothing; restarted on its port, empty; stalled, it
// answers once the sleep is over.
func TestPrivateRedis(t *testing.T) {
	s := PrivateRedis(t)
	if _, err := RedisCommand(s.Addr(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if _, err := RedisCommand(s.Addr(), "PING"); err == nil {
		t.Fatal("answers after the kill")
	}
	s.Restart()
	if line, err := RedisCommand(s.Addr(), "EXISTS", "k"); err != nil || line != ":0" {
		t.Fatalf("after the restart: %q %v", line, err)
	}
	over := s.Stall(time.Second)
	if _, err := redisCommand(s.Addr(), 100*time.Millisecond, "PING"); err == nil {
		t.Fatal("answers while stalled")
	}
	<-over
	if _, err := RedisCommand(s.Addr(), "PING"); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
}
