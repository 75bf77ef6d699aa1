// Package feeds follows each configured chain and delivers its blocks, logs and reorgs to
// every consumer of that chain at once: one feed per chain, shared by all WebSocket
// subscriptions (eth_subscribe) and HTTP filters (eth_getFilterChanges) of a process, so
// that N clients never cause N upstream calls.
//
// A feed polls its chain through the chain's upstream pool: eth_getBlockByNumber("latest",
// false) every feeds.pollInterval, and at once when the pool's own head tracking sees a
// higher head. A chain with ws(s):// URLs (upstreams.chains[].wsUrls) is not polled while a
// socket to one of them is subscribed to newHeads (push.go): each pushed head is taken as
// the latest block, and the feed polls only when the pool's head stays above the delivered
// block for feeds.pollInterval (the socket's node lags) or no socket is up. It runs one
// goroutine (and, with ws URLs, the socket's), only while it has
// sinks or its filter methods (Changes, Latest) were called in the last idleAfter (5
// minutes); an idle feed forgets its history and starts afresh with its next consumer.
//
// Each block number is delivered exactly once, ascending: a gap (a missed poll, a failover
// to a node that had more blocks) is read block by block, runs of up to maxBatch-1 blocks
// and their logs in one round trip, each block checked to be the child of the one before. A
// gap longer than feeds.maxCatchUp is not replayed: a warning is logged and the feed
// resumes at the head (the blocks in between are never delivered, and no Removed events are
// delivered for the blocks before the gap). A node that answers a lower head than the
// delivered one (a failover to a lagging node) delivers nothing until the chain passes the
// delivered head, unless its block at that height has another hash: that is a reorg.
//
// A reorg (a new block whose parent is not the delivered block below it) is followed back,
// by number, to the newest block the feed delivered that is still on the chain; the blocks
// above it are delivered again as Removed events, oldest first (with their logs, which
// consumers send again with "removed": true), then the new branch ascending. A reorg deeper
// than feeds.history removes every block in the history and delivers the new branch from
// the history's oldest height. Removed blocks stay findable by hash for Changes (up to
// feeds.history of them).
//
// Logs are fetched only while a sink subscribed with logs, or Changes was asked for logs
// in the last idleAfter: for every consumer together, per run of blocks one eth_getLogs over
// the run (checked against the blocks' hashes, a block whose logs do not check out read
// again by hash), or one eth_getLogs by hash for a single new block.
package feeds

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/upstreams"
)

// Chain is the upstream pool of one chain (*upstreams.Pool satisfies it).
type Chain interface {
	Forward(ctx context.Context, method string, params []byte) ([]byte, error)
	ForwardBatch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error)
	// Head is the pool's head tracking: the best head among the nodes in rotation, 0 unknown.
	Head() uint64
}

var _ Chain = (*upstreams.Pool)(nil)

// Deps are the dependencies of New.
type Deps struct {
	// Chains are the upstream pools by chain id; one feed each. A Chain with a
	// `Name() string` method (*upstreams.Pool) names the chain in logs and metrics, else the
	// decimal chain id does.
	Chains map[uint64]Chain
	// Logger: nil, no logs.
	Logger *zap.Logger
	// Registry receives the web3gate_feed_* metrics; nil: they are not registered.
	Registry prometheus.Registerer
	// Sockets are the ws(s):// node URLs by chain id (upstreams.chains[].wsUrls): a chain
	// with some takes pushed heads (unless cfg.Push.Disabled).
	Sockets map[uint64][]string
}

// The feeds' fixed timings.
const (
	// idleAfter: a feed without sinks whose Changes and Latest have not been called for this
	// long stops (and Changes with logs for this long stops the fetching of logs).
	idleAfter = 5 * time.Minute
	// headCheck is how often a feed looks at its pool's head between polls.
	headCheck = 25 * time.Millisecond
	// roundTimeout bounds one round of a feed (the head poll and the blocks it brings).
	roundTimeout = time.Minute
	// maxBackoff bounds the wait after failed rounds in a row.
	maxBackoff = 5 * time.Second
	// notYetPatience rounds in a row that fail for a block the node does not have yet are
	// logged as a warning; fewer only at debug level.
	notYetPatience = 10
)

// errClosed is the error of Changes and Latest after Close.
var errClosed = jsonrpc.ErrUpstreamUnavailable.With("feeds closed")

// Set is the feed of every chain.
type Set struct {
	feeds  map[uint64]*Feed
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex // orders the goroutines' start (wg.Add) before Close's wait
	closed atomic.Bool
	wg     sync.WaitGroup
}

// New builds one feed per chain of deps.Chains (cfg's unset fields defaulted, then
// validated). Nothing is asked of a chain before its feed's first consumer.
func New(cfg Config, deps Deps) (*Set, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("feeds config: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	m := newMetrics(deps.Registry)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Set{feeds: make(map[uint64]*Feed, len(deps.Chains)), ctx: ctx, cancel: cancel}
	for id, ch := range deps.Chains {
		if ch == nil {
			cancel()
			return nil, fmt.Errorf("feeds: chain %d has no upstream pool", id)
		}
		name := strconv.FormatUint(id, 10)
		if n, ok := ch.(interface{ Name() string }); ok && n.Name() != "" {
			name = n.Name()
		}
		s.feeds[id] = &Feed{
			set: s, chainID: id, name: name, chain: ch, cfg: cfg,
			log: log.With(zap.String("chain", name)), m: m.chain(name),
			idleAfter: idleAfter,
			byHash:    make(map[common.Hash]*Block),
		}
		if urls := deps.Sockets[id]; len(urls) > 0 && !cfg.Push.Disabled {
			s.feeds[id].sockets = append([]string(nil), urls...)
		}
	}
	return s, nil
}

// Feed returns the feed of a chain.
func (s *Set) Feed(chainID uint64) (*Feed, bool) {
	f, ok := s.feeds[chainID]
	return f, ok
}

// Close stops every feed goroutine and waits for them; sinks get nothing more. Afterwards
// Subscribe adds nothing, and Changes and Latest fail. It is idempotent; it must not be
// called from a Sink's Deliver (it waits for the goroutine that calls Deliver).
func (s *Set) Close() {
	s.mu.Lock()
	s.closed.Store(true)
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Feed is the live feed of one chain.
type Feed struct {
	set     *Set
	chainID uint64
	name    string
	chain   Chain
	cfg     Config
	log     *zap.Logger
	m       *chainMetrics

	idleAfter time.Duration // idleAfter, shorter in tests
	sockets   []string      // ws(s) URLs of the push; empty: the feed polls

	mu           sync.Mutex
	sinks        []*sinkEntry    // guarded by mu
	logSinks     int             // sinks with logs; guarded by mu
	sinksChanged bool            // sinks changed since the goroutine's last snapshot; guarded by mu
	running      bool            // the goroutine runs; guarded by mu
	startFrom    uint64          // the pool's head when a sink woke the idle feed; guarded by mu
	startSet     bool            // startFrom is set; guarded by mu
	startLate    bool            // a first subscription stopped waiting for the first head; guarded by mu
	waiters      []chan struct{} // closed at the end of the first round whose sinks include theirs; guarded by mu
	lastUse      time.Time       // last Changes or Latest; guarded by mu
	lastLogsUse  time.Time       // last Changes with logs; guarded by mu

	// The history, written by the goroutine, read by Changes; guarded by mu.
	hist    []*Block               // the delivered chain, ascending and contiguous, at most cfg.History
	byHash  map[common.Hash]*Block // hist's blocks and the orphans
	orphans []common.Hash          // removed blocks in byHash, oldest removal first, at most cfg.History
	lastOK  time.Time              // end of the last successful round
	seen    uint64                 // the latest block number seen

	// The goroutine's own.
	snapshot []*sinkEntry // the sinks of the current round
	span     int          // blocks per run (halved after failures, grows back)
	okStreak int
	ready    []chan struct{} // the waiters of the current round's sinks
}

// sinkEntry is one subscription.
type sinkEntry struct {
	s    Sink
	logs bool
	idx  int         // position in Feed.sinks; guarded by Feed.mu
	gone atomic.Bool // unsubscribed
}

// Event is one step of a feed, delivered in order. On a reorg: first Removed events for the
// blocks that left the canonical chain, OLDEST FIRST (their logs again with removed:true;
// newHeads subscribers ignore Removed events), then the new branch's blocks ascending as
// ordinary events.
type Event struct {
	Block   *Block
	Removed bool
}

// Sink receives a feed's events. Deliver is called on the feed's goroutine, in order, and
// must not block (queue and return).
type Sink interface{ Deliver(ev Event) }

// Subscribe adds s; logs=true makes the feed fetch logs for every new block while s is
// subscribed. s gets the events of the feed's rounds that start after Subscribe: the blocks
// after the chain's head as the feed knew it then, as with geth, blocks mined after the
// subscription. A feed without history (idle, woken by s) reads the head first: Subscribe
// returns once it has (at most feeds.startWait; past it s starts after the head the pool
// last polled, and may get first a block mined just before). On a running feed that polls,
// its head may be up to a poll interval old (a block mined just before may come); with a
// push socket up it is the node's. unsubscribe is idempotent and may be called from
// Deliver; after it returns, s gets nothing more, except at most the one event being
// delivered at that moment. After Set.Close, Subscribe adds nothing.
func (f *Feed) Subscribe(s Sink, logs bool) (unsubscribe func()) {
	e := &sinkEntry{s: s, logs: logs}
	f.mu.Lock()
	if f.set.closed.Load() {
		f.mu.Unlock()
		return func() {}
	}
	e.idx = len(f.sinks)
	f.sinks = append(f.sinks, e)
	if logs {
		f.logSinks++
	}
	f.sinksChanged = true
	f.m.sinks.Set(float64(len(f.sinks)))
	var ready chan struct{}
	if len(f.hist) == 0 {
		if !f.running {
			// The start when the wait below times out. 0 is the genesis or, before the
			// pool's first head poll, unknown: begin tells them apart by maxCatchUp.
			f.startFrom, f.startSet = f.chain.Head(), true
		}
		ready = make(chan struct{})
		f.waiters = append(f.waiters, ready)
	}
	f.startLocked()
	f.mu.Unlock()
	if ready != nil {
		t := time.NewTimer(f.cfg.StartWait)
		select {
		case <-ready:
		case <-t.C:
			f.mu.Lock()
			f.startLate = true
			f.mu.Unlock()
		case <-f.set.ctx.Done():
		}
		t.Stop()
	}
	var once sync.Once
	return func() { once.Do(func() { f.remove(e) }) }
}

// remove takes e out of the sinks.
func (f *Feed) remove(e *sinkEntry) {
	e.gone.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	last := len(f.sinks) - 1
	moved := f.sinks[last]
	f.sinks[e.idx] = moved
	moved.idx = e.idx
	f.sinks[last] = nil
	f.sinks = f.sinks[:last]
	if e.logs {
		f.logSinks--
	}
	f.sinksChanged = true
	f.m.sinks.Set(float64(len(f.sinks)))
}

// touch records a Changes or Latest call (logs: Changes with logs) and starts the goroutine.
func (f *Feed) touch(logs bool) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastUse = now
	if logs {
		f.lastLogsUse = now
	}
	f.startLocked()
}

// startLocked starts the goroutine unless it runs or the set is closed. f.mu is held.
func (f *Feed) startLocked() {
	if f.running {
		return
	}
	f.set.mu.Lock()
	defer f.set.mu.Unlock()
	if f.set.closed.Load() {
		return
	}
	f.running = true
	f.set.wg.Add(1)
	go f.run(f.set.ctx)
}

// idle reports, and records, that the goroutine is to stop: no sinks, and no Changes or
// Latest for idleAfter. The history is dropped then: it would be stale at the next start;
// and so is the last round's snapshot of the sinks, which would keep the sinks gone since
// (a logs subscription's filter is up to tens of KiB) until the next start.
func (f *Feed) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sinks) > 0 || time.Since(f.lastUse) < f.idleAfter {
		return false
	}
	f.running = false
	f.dropHistoryLocked()
	clear(f.snapshot)
	f.snapshot = f.snapshot[:0]
	f.sinksChanged = true
	return true
}

// idleNow reports whether idle would stop the goroutine now, without recording it.
func (f *Feed) idleNow() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sinks) == 0 && time.Since(f.lastUse) >= f.idleAfter
}

// dropHistoryLocked forgets every block. f.mu is held.
func (f *Feed) dropHistoryLocked() {
	clear(f.hist)
	f.hist = f.hist[:0]
	clear(f.byHash)
	f.orphans = nil
	f.lastOK = time.Time{}
	f.startLate = false
}

// run is the feed's goroutine: a round at each poll, or at each pushed head while a push
// socket is up, until idle or closed. A failed round is retried at the next poll, after a
// backoff when failures repeat; it is logged once per run of failures (a warning), except
// for blocks a node does not have yet (a node behind another), which is expected now and
// then and logged only when it lasts notYetPatience rounds.
func (f *Feed) run(ctx context.Context) {
	defer f.set.wg.Done()
	var push *pusher
	if len(f.sockets) > 0 {
		push = newPusher(f.sockets, f.cfg.Push, f.log, f.m)
		pctx, stop := context.WithCancel(ctx)
		var pwg sync.WaitGroup
		pwg.Go(func() { push.run(pctx) })
		defer pwg.Wait()
		defer stop()
	}
	ticker := time.NewTicker(min(headCheck, f.cfg.PollInterval))
	defer ticker.Stop()
	failures, warned := 0, false
	poll := true // the next round polls; false: it takes the pushed heads
	for {
		if ctx.Err() != nil {
			f.mu.Lock()
			f.running = false
			f.mu.Unlock()
			return
		}
		if f.idle() {
			return
		}
		poolHead := f.chain.Head()
		var err error
		if poll {
			err = f.round(ctx, nil)
		} else {
			for _, h := range push.take() {
				if err = f.round(ctx, h); err != nil {
					break
				}
			}
		}
		notYet := errors.Is(err, errNotYet)
		switch {
		case err == nil:
			if warned {
				f.log.Info("feed resumed", zap.Int("failed_rounds", failures))
			}
			failures, warned = 0, false
		case ctx.Err() != nil:
			continue
		default:
			failures++
			if !warned && (!notYet || failures >= notYetPatience) {
				f.log.Warn("feed round failed; retrying", zap.Error(err), zap.Int("failures", failures))
				warned = true
			} else if ce := f.log.Check(zap.DebugLevel, "feed round failed"); ce != nil {
				ce.Write(zap.Error(err), zap.Int("failures", failures))
			}
		}
		wait := f.cfg.PollInterval
		if failures > 1 && !notYet {
			wait = min(f.cfg.PollInterval<<min(failures-1, 16), max(maxBackoff, f.cfg.PollInterval))
		}
		// pushing: the socket is up and the feed is on track; it then polls only when the
		// pool's head stays above the delivered block for a poll interval.
		pushing := func() bool { return push != nil && push.up.Load() && failures == 0 && f.tip() != nil }
		var notify <-chan struct{}
		if push != nil {
			notify = push.notify
		}
		last := time.Now()
		var ahead time.Time // since when the pool's head is above the delivered block
		poll = true
	wait:
		for {
			if pushing() && push.queued() {
				poll = false
				break wait
			}
			select {
			case <-ctx.Done():
				break wait
			case <-notify:
				if pushing() {
					poll = false
					break wait
				}
			case now := <-ticker.C:
				if pushing() {
					if f.idleNow() {
						break wait // the loop's idle check ends the goroutine
					}
					if h, tip := f.chain.Head(), f.tip(); h > tip.Number {
						if ahead.IsZero() {
							ahead = now
						} else if now.Sub(ahead) >= f.cfg.PollInterval {
							f.m.lagPolls.Inc()
							f.log.Info("feed push lags the upstream pool; polling and moving the socket to the next node",
								zap.Uint64("delivered", tip.Number), zap.Uint64("pool_head", h))
							push.rotate()
							break wait
						}
					} else {
						ahead = time.Time{}
					}
					continue
				}
				if now.Sub(last) >= wait || (failures == 0 && f.chain.Head() > poolHead) {
					break wait
				}
			}
		}
	}
}
