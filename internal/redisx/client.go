// Package redisx is web3gate's client of Redis, the second level that the replicas of one
// deployment share behind their in-process caches (the response cache and the metadata
// records' hot cache).
//
// Redis is an accelerator, never a dependency: every operation is bounded by a short
// timeout, and a lookup that fails or times out is a miss, so the request goes on to the
// store or the upstream. Failures are counted and logged at most once per downLogInterval.
// After failureThreshold failures in a row Redis is marked down: nothing is sent to it (a
// lookup is a miss at no cost, a fill is dropped) while a background probe tries it again
// after a back-off that doubles up to maxBackoff; the first probe that succeeds marks it up.
//
// The client is rueidis (auto-pipelining: the operations of concurrent requests share a few
// connections). docs/performance.md has the measurements that chose it over go-redis.
package redisx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/rawconn"
)

// Status is how an operation went.
type Status uint8

const (
	// Hit: the key was there.
	Hit Status = iota
	// Miss: Redis answered that the key is not there.
	Miss
	// Failed: the operation failed or timed out (counted; the request goes on without it).
	Failed
	// Skipped: Redis is marked down (or the client is nil: Redis not configured); nothing was sent.
	Skipped
)

// String is the status as a metrics label.
func (s Status) String() string {
	switch s {
	case Hit:
		return "hit"
	case Miss:
		return "miss"
	case Failed:
		return "error"
	default:
		return "skipped"
	}
}

// Deps are the client's collaborators.
type Deps struct {
	Logger   *zap.Logger
	Registry prometheus.Registerer
}

// holder lets an atomic.Pointer hold the rueidis.Client interface.
type holder struct{ c rueidis.Client }

// opDeadline is a context that operations started within timeout/8 of each other share,
// so that an operation pays for no context and timer of its own (a visible share of a Redis
// hit's CPU: docs/performance.md, "Notes from the code", internal/redisx). Each operation
// gets from 7/8 of the timeout to the whole of it. Its timer releases it at the deadline.
type opDeadline struct {
	ctx      context.Context
	cancel   context.CancelFunc
	deadline time.Time
}

// opCtx returns the shared context of an operation starting now.
func (c *Client) opCtx() context.Context {
	now := time.Now()
	if d := c.op.Load(); d != nil && d.deadline.Sub(now) >= c.cfg.Timeout-c.cfg.Timeout/8 {
		return d.ctx
	}
	d := &opDeadline{deadline: now.Add(c.cfg.Timeout)}
	d.ctx, d.cancel = context.WithDeadline(c.ctx, d.deadline)
	c.op.Store(d)
	return d.ctx
}

// Client is a Redis client with a circuit breaker. A nil *Client is valid: Redis not
// configured; every lookup is Skipped and every write a no-op.
type Client struct {
	cfg    Config
	target target
	log    *zap.Logger

	cl   atomic.Pointer[holder] // nil until a connection was made once
	down atomic.Bool            // marked down: nothing is sent
	// fails counts failed operations in a row; reset by the first success.
	fails atomic.Int64
	wake  chan struct{} // starts the prober when Redis is marked down

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int  // trouble not logged since lastLog
	troubled   bool // trouble was logged since the last recovery: the next one will be

	ctx      context.Context // ended by Close
	cancel   context.CancelFunc
	op       atomic.Pointer[opDeadline] // the deadline operations share
	wmu      sync.Mutex                 // guards closed and writes.Add against Close
	closed   bool
	writes   sync.WaitGroup // background writes
	inflight chan struct{}  // semaphore of background writes
	probed   chan struct{}  // closed when the prober has ended

	up      prometheus.Gauge
	errs    *prometheus.CounterVec
	skipped *prometheus.CounterVec
}

// New connects to the configured Redis. It returns nil, nil when no URL is configured. A
// Redis that cannot be reached at start is no error: the client starts marked down and the
// probe connects once Redis answers.
func New(cfg Config, deps Deps) (*Client, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if deps.Registry == nil {
		return nil, errors.New("redis: a registry is required")
	}
	t, err := parseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis.url: %w", err)
	}
	c := &Client{cfg: cfg, target: t, log: deps.Logger, wake: make(chan struct{}, 1),
		inflight: make(chan struct{}, cfg.MaxWritesInFlight), probed: make(chan struct{})}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.log = c.log.With(zap.String("addr", t.addr))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	f := promauto.With(deps.Registry)
	c.up = f.NewGauge(prometheus.GaugeOpts{
		Name: "web3gate_redis_up",
		Help: "1 while Redis is used, 0 while it is marked down (after redis.failureThreshold failures in a row, until a probe succeeds).",
	})
	c.errs = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_redis_errors_total",
		Help: "Redis operations that failed or timed out, by operation (get, set, del, scan, script, ping, connect).",
	}, []string{"op"})
	c.skipped = f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_redis_skipped_total",
		Help: "Redis operations not sent, by operation and reason: down (Redis marked down) or busy (redis.maxWritesInFlight background writes already in flight).",
	}, []string{"op", "reason"})
	for _, op := range []string{"get", "set", "del", "scan", "script", "ping", "connect"} {
		c.errs.WithLabelValues(op)
	}
	go c.probeLoop()
	if err := c.connect(); err != nil {
		c.failed("connect", err)
		c.markDown()
	} else {
		c.up.Set(1)
		c.log.Info("redis connected", zap.String("keyPrefix", cfg.KeyPrefix))
	}
	return c, nil
}

// options are rueidis's options for the configured target.
func (c *Client) options() rueidis.ClientOption {
	opt := rueidis.ClientOption{
		InitAddress:       []string{c.target.addr},
		Username:          c.target.username,
		Password:          c.target.password,
		SelectDB:          c.target.db,
		ClientName:        "web3gate",
		ForceSingleClient: true,
		// The local caches are the first level; Redis's client-side caching would be a third.
		DisableCache: true,
		// A failed operation is a miss; a retry would only hold the request longer.
		DisableRetry:      true,
		PipelineMultiplex: log2(c.cfg.connections()),
		BlockingPoolSize:  c.cfg.connections(),
		Dialer:            net.Dialer{Timeout: c.cfg.DialTimeout, KeepAlive: 15 * time.Second},
		// Reads and writes as raw system calls, as the upstream connections make them: less
		// CPU per Redis hit (docs/performance.md, "Notes from the code", internal/redisx).
		DialCtxFn: dialRaw,
		// A connection that answers nothing for this long is closed and dialled anew.
		ConnWriteTimeout: max(time.Second, c.cfg.DialTimeout),
		// Under load, operations written together cost web3gate and Redis fewer system calls.
		MaxFlushDelay: c.cfg.MaxFlushDelay,
		// 64 KiB buffers instead of 0.5 MiB per connection: values are JSON results.
		ReadBufferEachConn:  64 << 10,
		WriteBufferEachConn: 64 << 10,
	}
	if c.target.tls {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.target.host}
	}
	return opt
}

func log2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// dialRaw dials dst as rueidis would, with the TCP connection's reads and writes as raw
// system calls (internal/rawconn), and TLS over it when configured.
func dialRaw(ctx context.Context, dst string, dialer *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	c, err := dialer.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	c = rawconn.Wrap(c)
	if cfg == nil {
		return c, nil
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// connect makes a new rueidis client, which dials, logs in and selects the database at once,
// and puts it in place of the previous one (closed): after an outage every connection is
// new, none left broken to fail the first operation sent on it.
func (c *Client) connect() error {
	rc, err := rueidis.NewClient(c.options())
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		rc.Close()
		return errors.New("closed")
	}
	if old := c.cl.Swap(&holder{rc}); old != nil {
		old.c.Close()
	}
	return nil
}

// Close stops the probe, waits for the background writes, and closes the connections.
func (c *Client) Close() {
	if c == nil {
		return
	}
	c.wmu.Lock()
	c.closed = true
	c.wmu.Unlock()
	c.cancel()
	c.writes.Wait()
	<-c.probed
	if h := c.cl.Load(); h != nil {
		h.c.Close()
	}
}

// KeyPrefix is the configured prefix of every key.
func (c *Client) KeyPrefix() string {
	if c == nil {
		return ""
	}
	return c.cfg.KeyPrefix
}

// MaxTTL is the longest expiry of an entry (redis.maxTtl).
func (c *Client) MaxTTL() time.Duration { return c.cfg.MaxTTL }

// Up reports whether Redis is in use: configured and not marked down.
func (c *Client) Up() bool { return c != nil && !c.down.Load() && c.cl.Load() != nil }

// usable returns the rueidis client, or nil (counting the skip) while Redis is marked down.
func (c *Client) usable(op string) rueidis.Client {
	if c == nil {
		return nil
	}
	h := c.cl.Load()
	if h == nil || c.down.Load() {
		c.skipped.WithLabelValues(op, "down").Inc()
		return nil
	}
	return h.c
}

// Get returns the value of key. Failed and Skipped lookups are misses to the caller.
func (c *Client) Get(key string) ([]byte, Status) {
	rc := c.usable("get")
	if rc == nil {
		return nil, Skipped
	}
	v, err := rc.Do(c.opCtx(), rc.B().Get().Key(key).Build()).AsBytes()
	switch {
	case err == nil:
		c.ok()
		return v, Hit
	case rueidis.IsRedisNil(err):
		c.ok()
		return nil, Miss
	}
	c.failed("get", err)
	return nil, Failed
}

// Set writes key in the background with the expiry ttl (at most, and when 0, maxTtl).
// value must not change afterwards. A write is dropped while Redis is marked down or when
// maxWritesInFlight writes are in flight.
func (c *Client) Set(key string, value []byte, ttl time.Duration) {
	rc := c.usable("set")
	if rc == nil {
		return
	}
	if ttl <= 0 || ttl > c.cfg.MaxTTL {
		ttl = c.cfg.MaxTTL
	}
	select {
	case c.inflight <- struct{}{}:
	default:
		c.skipped.WithLabelValues("set", "busy").Inc()
		return
	}
	c.wmu.Lock()
	if c.closed {
		c.wmu.Unlock()
		<-c.inflight
		return
	}
	c.writes.Add(1)
	c.wmu.Unlock()
	cmd := rc.B().Set().Key(key).Value(rueidis.BinaryString(value)).Px(ttl).Build()
	go func() {
		defer c.writes.Done()
		defer func() { <-c.inflight }()
		err := rc.Do(c.opCtx(), cmd).Error()
		if err != nil {
			c.failed("set", err)
			return
		}
		c.ok()
	}()
}

// WaitWrites waits until the background writes sent so far are done.
func (c *Client) WaitWrites() {
	if c != nil {
		c.writes.Wait()
	}
}

// Del removes keys, waiting for Redis at most the timeout.
func (c *Client) Del(keys ...string) Status {
	rc := c.usable("del")
	if rc == nil || len(keys) == 0 {
		return Skipped
	}
	err := rc.Do(c.opCtx(), rc.B().Del().Key(keys...).Build()).Error()
	if err != nil {
		c.failed("del", err)
		return Failed
	}
	c.ok()
	return Hit
}

// DeleteMatching removes every key matching the glob pattern (SCAN, then UNLINK in batches)
// within ctx, each step bounded by the dial timeout. It returns how many keys it removed. It
// is for start-up (a chain that started over), not for the request path.
func (c *Client) DeleteMatching(ctx context.Context, pattern string) (int, error) {
	rc := c.usable("scan")
	if rc == nil {
		return 0, errors.New("redis is down")
	}
	n := 0
	var cursor uint64
	for {
		sctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
		e, err := rc.Do(sctx, rc.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err == nil && len(e.Elements) > 0 {
			err = rc.Do(sctx, rc.B().Unlink().Key(e.Elements...).Build()).Error()
		}
		cancel()
		if err != nil {
			c.failed("scan", err)
			return n, err
		}
		n += len(e.Elements)
		if cursor = e.Cursor; cursor == 0 {
			c.ok()
			return n, nil
		}
	}
}

// ok records a success: the failures in a row end.
func (c *Client) ok() {
	if c.fails.Load() != 0 {
		c.fails.Store(0)
	}
}

// failed counts a failed operation, logs it (at most once per downLogInterval), and marks
// Redis down after failureThreshold failures in a row. Redis's own error replies (a full
// Redis refusing writes, a wrong type) are counted and logged but say Redis is up.
func (c *Client) failed(op string, err error) {
	if c.ctx.Err() != nil {
		return // closing: the operations in flight were cut short, nothing is wrong
	}
	c.errs.WithLabelValues(op).Inc()
	_, reply := rueidis.IsRedisErr(err)
	c.logThrottled(func(suppressed int) {
		c.log.Warn("redis operation failed; serving from the local caches", zap.String("op", op),
			zap.String("error", describe(err)), zap.Int("failures_not_logged", suppressed))
	})
	if reply {
		return
	}
	if c.fails.Add(1) >= int64(c.cfg.FailureThreshold) {
		c.markDown()
	}
}

// markDown stops every operation and wakes the prober.
func (c *Client) markDown() {
	if !c.down.CompareAndSwap(false, true) {
		return
	}
	c.up.Set(0)
	c.logThrottled(func(suppressed int) {
		c.log.Warn("redis marked down: requests skip it and are served from the local caches until a probe succeeds",
			zap.Duration("first_probe_in", c.cfg.Backoff), zap.Int("failures_not_logged", suppressed))
	})
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// logThrottled logs trouble with log unless trouble was logged within downLogInterval,
// passing the number of events not logged since the last log.
func (c *Client) logThrottled(log func(suppressed int)) {
	c.logMu.Lock()
	now := time.Now()
	if !c.lastLog.IsZero() && now.Sub(c.lastLog) < c.cfg.DownLogInterval {
		c.suppressed++
		c.logMu.Unlock()
		return
	}
	n := c.suppressed
	c.lastLog, c.suppressed, c.troubled = now, 0, true
	c.logMu.Unlock()
	log(n)
}

// probeLoop waits until Redis is marked down, then probes it after a growing back-off until
// a probe succeeds.
func (c *Client) probeLoop() {
	defer close(c.probed)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		backoff := c.cfg.Backoff
		for c.down.Load() {
			t := time.NewTimer(backoff)
			select {
			case <-c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if err := c.probe(); err != nil {
				c.errs.WithLabelValues("ping").Inc()
				c.logThrottled(func(suppressed int) {
					c.log.Warn("redis still down", zap.String("error", describe(err)),
						zap.Duration("next_probe_in", min(2*backoff, c.cfg.MaxBackoff)), zap.Int("failures_not_logged", suppressed))
				})
				backoff = min(2*backoff, c.cfg.MaxBackoff)
				continue
			}
			c.fails.Store(0)
			c.down.Store(false)
			c.up.Set(1)
			c.logMu.Lock()
			logged := c.troubled
			c.troubled = false
			c.logMu.Unlock()
			if logged { // whoever read the trouble reads the end of it
				c.log.Info("redis is back: used again")
			}
		}
	}
}

// probe connects anew and PINGs.
func (c *Client) probe() error {
	if err := c.connect(); err != nil {
		return err
	}
	rc := c.cl.Load().c
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout+c.cfg.Timeout)
	defer cancel()
	return rc.Do(ctx, rc.B().Ping().Build()).Error()
}

// describe is err's text for a log: Redis's replies and network errors, with nothing of the
// URL (rueidis's errors name the address at most, which the logger carries anyway).
func describe(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}
