package redisx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
)

func TestMain(m *testing.M) { leaktest.MainIgnoring(m) }

// env is a client under test, its metrics and its logs.
type env struct {
	c    *Client
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
}

func newClient(t *testing.T, url, prefix string, tune func(*Config)) *env {
	t.Helper()
	cfg := Config{URL: url, KeyPrefix: prefix}
	cfg.SetDefaults()
	if tune != nil {
		tune(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	e := &env{reg: prometheus.NewRegistry(), logs: logs}
	var err error
	if e.c, err = New(cfg, Deps{Logger: zap.New(core), Registry: e.reg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.c.Close)
	return e
}

func (e *env) counter(name string, labels ...string) float64 {
	switch name {
	case "errors":
		return testutil.ToFloat64(e.c.errs.WithLabelValues(labels...))
	case "skipped":
		return testutil.ToFloat64(e.c.skipped.WithLabelValues(labels...))
	}
	panic(name)
}

func (e *env) up() float64 { return testutil.ToFloat64(e.c.up) }

func TestNilClientIsRedisOff(t *testing.T) {
	c, err := New(Config{}, Deps{Registry: prometheus.NewRegistry()})
	if err != nil || c != nil {
		t.Fatalf("no url: %v %v, want nil, nil", c, err)
	}
	if v, st := c.Get("k"); v != nil || st != Skipped {
		t.Errorf("get on nil: %q %v", v, st)
	}
	c.Set("k", []byte("v"), time.Second)
	if c.Del("k") != Skipped || c.Up() || c.KeyPrefix() != "" {
		t.Error("nil client acts")
	}
	c.WaitWrites()
	c.Close()
}

func TestGetSetDel(t *testing.T) {
	url, prefix := testengine.Redis(t)
	e := newClient(t, url, prefix, func(c *Config) { c.MaxTTL = time.Hour })
	c := e.c
	if !c.Up() || e.up() != 1 {
		t.Fatal("not up after connecting")
	}
	if v, st := c.Get(prefix + "absent"); st != Miss || v != nil {
		t.Fatalf("absent key: %q %v", v, st)
	}
	value := []byte("{\"x\":\"\x00\xff binary-safe\"}")
	c.Set(prefix+"short", value, 1500*time.Millisecond)
	c.Set(prefix+"forever", value, 0)
	c.Set(prefix+"long", value, 48*time.Hour)
	c.WaitWrites()
	for _, k := range []string{"short", "forever", "long"} {
		if v, st := c.Get(prefix + k); st != Hit || string(v) != string(value) {
			t.Fatalf("%s: %q %v", k, v, st)
		}
	}
	// The expiry is the one given, and maxTtl when none or a longer one is.
	for k, want := range map[string][2]int{"short": {1000, 1500}, "forever": {3590_000, 3600_000}, "long": {3590_000, 3600_000}} {
		line, err := testengine.RedisCommand(testengine.RedisAddr(), "PTTL", prefix+k)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := strconv.Atoi(strings.TrimPrefix(line, ":"))
		if ms < want[0] || ms > want[1] {
			t.Errorf("%s: PTTL %d ms, want %d..%d", k, ms, want[0], want[1])
		}
	}
	if st := c.Del(prefix+"short", prefix+"long"); st != Hit {
		t.Fatalf("del: %v", st)
	}
	if _, st := c.Get(prefix + "short"); st != Miss {
		t.Fatalf("deleted key: %v", st)
	}
	if n := e.counter("errors", "get") + e.counter("errors", "set"); n != 0 {
		t.Errorf("%v errors counted against a healthy Redis", n)
	}
}

func TestDeleteMatchingRemovesOnlyThePattern(t *testing.T) {
	url, prefix := testengine.Redis(t)
	e := newClient(t, url, prefix, nil)
	for i := range 2500 {
		e.c.Set(fmt.Sprintf("%smd:7/%04d", prefix, i), []byte("x"), time.Minute)
		if i%200 == 0 {
			e.c.WaitWrites() // stay under maxWritesInFlight
		}
	}
	e.c.Set(prefix+"md:70/0001", []byte("x"), time.Minute)
	e.c.Set(prefix+"rc:7:eth_getBlockByHash:[]", []byte("x"), time.Minute)
	e.c.WaitWrites()
	if n := e.counter("skipped", "set", "busy"); n != 0 {
		t.Fatalf("%v writes dropped", n)
	}
	n, err := e.c.DeleteMatching(context.Background(), prefix+"md:7/*")
	if err != nil || n != 2500 {
		t.Fatalf("deleted %d, %v; want 2500", n, err)
	}
	keys, err := testengine.RedisKeys(testengine.RedisAddr(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("left %v, want the two keys outside the pattern", keys)
	}
}

// TestKilledRedisIsSkippedThenRecovered: Redis killed (-9) fails a few operations, is marked
// down (the next ones are skipped, nothing sent), is logged once per downLogInterval, and is
// used again by itself once it answers on the same port.
func TestKilledRedisIsSkippedThenRecovered(t *testing.T) {
	srv := testengine.PrivateRedis(t)
	e := newClient(t, srv.URL(), "t:", func(c *Config) {
		c.FailureThreshold = 2
		c.Backoff = 50 * time.Millisecond
		c.MaxBackoff = 200 * time.Millisecond
		c.DownLogInterval = time.Hour
	})
	c := e.c
	c.Set("t:k", []byte("v"), time.Minute)
	c.WaitWrites()
	if _, st := c.Get("t:k"); st != Hit {
		t.Fatalf("before the kill: %v", st)
	}
	srv.Kill()
	for i := range 2 {
		if _, st := c.Get("t:k"); st != Failed {
			t.Fatalf("get %d after the kill: %v, want error", i, st)
		}
	}
	if c.Up() || e.up() != 0 {
		t.Fatal("not marked down after failureThreshold failures")
	}
	for range 100 {
		if _, st := c.Get("t:k"); st != Skipped {
			t.Fatalf("get while down: %v, want skipped", st)
		}
		c.Set("t:k", []byte("v"), time.Minute)
	}
	if got := e.counter("errors", "get"); got != 2 {
		t.Errorf("errors{op=get} %v, want 2 (the rest skipped)", got)
	}
	if got := e.counter("skipped", "get", "down") + e.counter("skipped", "set", "down"); got != 200 {
		t.Errorf("skipped %v, want 200", got)
	}
	time.Sleep(500 * time.Millisecond) // several failed probes
	srv.Restart()
	wait.For(t, "redis used again after the restart", c.Up)
	if e.up() != 1 {
		t.Error("web3gate_redis_up not back to 1")
	}
	c.Set("t:k2", []byte("v2"), time.Minute)
	c.WaitWrites()
	if v, st := c.Get("t:k2"); st != Hit || string(v) != "v2" {
		t.Fatalf("after recovery: %q %v", v, st)
	}
	warns := e.logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 1 {
		t.Errorf("%d warnings within one downLogInterval, want 1: %v", len(warns), warns)
	}
	if e.logs.FilterMessage("redis is back: used again").Len() != 1 {
		t.Error("the recovery was not logged")
	}
}

// TestStalledRedisCostsAtMostTheTimeout: a Redis that answers nothing (DEBUG SLEEP) holds
// each lookup no longer than the timeout; once marked down, lookups do not wait at all;
// when it wakes up, it is used again.
func TestStalledRedisCostsAtMostTheTimeout(t *testing.T) {
	srv := testengine.PrivateRedis(t)
	e := newClient(t, srv.URL(), "t:", func(c *Config) {
		c.Timeout = 50 * time.Millisecond
		c.FailureThreshold = 3
		c.Backoff = 100 * time.Millisecond
	})
	c := e.c
	c.Set("t:k", []byte("v"), time.Minute)
	c.WaitWrites()
	over := srv.Stall(4 * time.Second)
	stalled := time.Now()
	var wg sync.WaitGroup
	statuses := make(chan Status, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, st := c.Get("t:k")
			statuses <- st
		}()
	}
	wg.Wait()
	// Not a speed assertion: the lookups ended while Redis still slept (4 s), so none waited for it.
	if d := time.Since(stalled); d > 3*time.Second {
		t.Fatalf("64 lookups against a sleeping Redis took %v: they waited for it", d)
	}
	close(statuses)
	for st := range statuses {
		if st == Hit || st == Miss {
			t.Fatalf("a lookup was answered by a sleeping Redis: %v", st)
		}
	}
	if c.Up() {
		t.Fatal("a Redis that answers nothing was not marked down")
	}
	<-over
	wait.For(t, "redis used again after the sleep", c.Up)
	if v, st := c.Get("t:k"); st != Hit || string(v) != "v" {
		t.Fatalf("after the stall: %q %v", v, st)
	}
}

func TestDownAtStartConnectsLater(t *testing.T) {
	srv := testengine.PrivateRedis(t)
	srv.Kill()
	e := newClient(t, srv.URL(), "t:", func(c *Config) { c.Backoff = 50 * time.Millisecond; c.MaxBackoff = 100 * time.Millisecond })
	if e.c.Up() || e.up() != 0 {
		t.Fatal("up without a Redis")
	}
	if _, st := e.c.Get("t:k"); st != Skipped {
		t.Fatalf("get with Redis down at start: %v", st)
	}
	if e.counter("errors", "connect") != 1 {
		t.Error("the failed connection was not counted")
	}
	srv.Restart()
	wait.For(t, "connected once Redis answers", e.c.Up)
	if _, st := e.c.Get("t:k"); st != Miss {
		t.Fatalf("get once connected: %v", st)
	}
}

// TestPasswordStaysOutOfLogsAndMetrics: a refused password and a dead Redis are logged and
// counted without the password.
func TestPasswordStaysOutOfLogsAndMetrics(t *testing.T) {
	const secret = "S3cretPassw0rd"
	srv := testengine.PrivateRedis(t)
	if _, err := testengine.RedisCommand(srv.Addr(), "CONFIG", "SET", "requirepass", "another-one"); err != nil {
		t.Fatal(err)
	}
	e := newClient(t, "redis://default:"+secret+"@"+srv.Addr()+"/0", "t:", func(c *Config) { c.Backoff = 20 * time.Millisecond })
	if e.c.Up() {
		t.Fatal("up with a wrong password")
	}
	time.Sleep(200 * time.Millisecond) // failed probes
	srv.Kill()
	time.Sleep(200 * time.Millisecond)
	var all strings.Builder
	for _, l := range e.logs.All() {
		fmt.Fprintf(&all, "%s %v\n", l.Message, l.ContextMap())
	}
	if e.logs.Len() == 0 || !strings.Contains(all.String(), srv.Addr()) {
		t.Fatalf("logs do not name the Redis: %s", all.String())
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		all.WriteString(mf.String())
	}
	if strings.Contains(all.String(), secret) {
		t.Fatalf("the password appears in logs or metrics:\n%s", all.String())
	}
}

// TestDialRawSpeaksTLS: rediss:// goes through dialRaw's TLS over the raw connection.
func TestDialRawSpeaksTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "over tls") }))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	addr := strings.TrimPrefix(srv.URL, "https://")
	c, err := dialRaw(context.Background(), addr, &net.Dialer{Timeout: time.Second}, &tls.Config{RootCAs: pool, ServerName: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	if !strings.HasSuffix(string(b), "over tls") {
		t.Fatalf("answer %q", b)
	}
	// A certificate the client does not trust fails the dial.
	if _, err := dialRaw(context.Background(), addr, &net.Dialer{Timeout: time.Second}, &tls.Config{ServerName: "example.com"}); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
}
