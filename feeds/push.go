package feeds

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// A pusher keeps one WebSocket to a node of the chain (its upstreams.chains[].wsUrls, in
// order, the next after a failure) subscribed to newHeads, and queues the pushed heads for
// the feed's goroutine. It runs while the feed runs. The feed takes a pushed head as its
// "latest" block: the same rules (gap read block by block, reorg walked back, nothing
// delivered twice) as a polled one, without the poll. While no socket is up the feed polls.

// The pusher's fixed timings.
const (
	// pushHandshake bounds the dial, the upgrade and the answer to eth_subscribe.
	pushHandshake = 10 * time.Second
	// pushWriteTimeout bounds one write (the subscribe, a ping) to the node.
	pushWriteTimeout = 5 * time.Second
)

type pusher struct {
	urls []string
	cfg  PushConfig
	log  *zap.Logger
	m    *chainMetrics

	up     atomic.Bool
	notify chan struct{} // cap 1: a head was queued

	mu     sync.Mutex
	queue  []*Block           // pushed heads not yet taken, oldest first; guarded by mu
	cancel context.CancelFunc // ends the current socket (rotate); guarded by mu
}

func newPusher(urls []string, cfg PushConfig, log *zap.Logger, m *chainMetrics) *pusher {
	return &pusher{urls: urls, cfg: cfg, log: log, m: m, notify: make(chan struct{}, 1)}
}

// take returns the queued heads, oldest first, and empties the queue.
func (p *pusher) take() []*Block {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	return q
}

// queued reports whether heads wait.
func (p *pusher) queued() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) > 0
}

// put queues b, dropping the oldest head beyond cfg.Queue (the feed reads the blocks a
// dropped head announced itself).
func (p *pusher) put(b *Block) {
	p.mu.Lock()
	p.queue = append(p.queue, b)
	if over := len(p.queue) - p.cfg.Queue; over > 0 {
		p.queue = append(p.queue[:0], p.queue[over:]...)
	}
	p.mu.Unlock()
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// rotate drops the current socket: the pusher reconnects to the next URL at once. Called
// when the node behind the socket lags the pool.
func (p *pusher) rotate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		p.cancel()
	}
}

// run keeps a socket up until ctx ends: on a failure, the next URL after a backoff
// (doubling from MinBackoff to MaxBackoff, with jitter; reset after a socket that stayed up
// MaxBackoff).
func (p *pusher) run(ctx context.Context) {
	defer p.setUp(false)
	failures, i := 0, 0
	for ctx.Err() == nil {
		idx := i % len(p.urls)
		sctx, cancel := context.WithCancel(ctx)
		p.mu.Lock()
		p.cancel = cancel
		p.mu.Unlock()
		began := time.Now()
		wasUp, err := p.session(sctx, p.urls[idx])
		cancel()
		p.setUp(false)
		p.mu.Lock()
		p.queue = nil // a head not taken yet is read by the polls
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if wasUp && time.Since(began) >= p.cfg.MaxBackoff {
			failures = 0
		}
		failures++
		// Messages name the URL by its index: URLs may hold secrets.
		if wasUp {
			p.log.Warn("feed push socket closed; polling until it is back", zap.Int("ws_url", idx), zap.Error(err))
		} else if failures <= 2 || failures%10 == 0 {
			p.log.Warn("feed push socket failed; polling", zap.Int("ws_url", idx), zap.Int("failures", failures), zap.Error(err))
		}
		i++
		wait := min(p.cfg.MinBackoff<<min(failures-1, 20), p.cfg.MaxBackoff)
		wait = wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (p *pusher) setUp(up bool) {
	if p.up.Swap(up) != up {
		if up {
			p.m.pushUp.Set(1)
		} else {
			p.m.pushUp.Set(0)
		}
	}
}

// errPushProtocol: the node answered something that is not a newHeads subscription.
var errPushProtocol = errors.New("unexpected answer of the node")

// session dials url, subscribes to newHeads and queues the heads until the socket fails or
// ctx ends. wasUp: the subscription was answered.
func (p *pusher) session(ctx context.Context, url string) (wasUp bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, pushHandshake)
	// No proxy from the environment: the upstream HTTP client uses none either.
	d := websocket.Dialer{HandshakeTimeout: pushHandshake}
	conn, resp, err := d.DialContext(dctx, url, nil)
	cancel()
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetReadLimit(int64(p.cfg.MaxMessageBytes))

	var wmu sync.Mutex // orders the subscribe and the pings
	write := func(typ int, data []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		dl := time.Now().Add(pushWriteTimeout)
		if typ == websocket.PingMessage {
			return conn.WriteControl(typ, data, dl)
		}
		_ = conn.SetWriteDeadline(dl)
		return conn.WriteMessage(typ, data)
	}
	_ = conn.SetReadDeadline(time.Now().Add(pushHandshake))
	if err := write(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)); err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	var subID string
	for subID == "" {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return false, fmt.Errorf("subscribe: %w", err)
		}
		r := gjson.ParseBytes(msg)
		if r.Get("id").Raw != "1" {
			continue // a notification of an older subscription cannot come on a new socket; skip
		}
		if e := r.Get("error"); e.Exists() {
			return false, fmt.Errorf("%w: eth_subscribe refused: %s", errPushProtocol, truncate(e.Raw, 200))
		}
		if subID = r.Get("result").String(); subID == "" {
			return false, fmt.Errorf("%w: eth_subscribe answered %s", errPushProtocol, truncate(r.Get("result").Raw, 200))
		}
	}

	alive := func() { _ = conn.SetReadDeadline(time.Now().Add(2 * p.cfg.PingInterval)) }
	alive()
	conn.SetPongHandler(func(string) error { alive(); return nil })
	p.setUp(true)
	p.log.Info("feed push socket up: heads pushed by the node")
	pingDone := make(chan struct{})
	defer close(pingDone)
	go func() {
		t := time.NewTicker(p.cfg.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-pingDone:
				return
			case <-t.C:
				if write(websocket.PingMessage, nil) != nil {
					conn.Close()
					return
				}
			}
		}
	}()
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			return true, err
		}
		alive()
		r := gjson.ParseBytes(msg)
		if r.Get("method").Str != "eth_subscription" || r.Get("params.subscription").String() != subID {
			continue
		}
		res := r.Get("params.result")
		b, err := parseBlock([]byte(res.Raw))
		if err != nil || b == nil {
			return true, fmt.Errorf("%w: a pushed head that is not a block header", errPushProtocol)
		}
		p.m.pushed.Inc()
		p.put(b)
	}
}

// truncate cuts s to n bytes for a log message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
