package upstreams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Node state bits. A node serves reads only when it is verified and neither wrong-chain nor
// ejected (see Pool.pick for the all-ejected fallback).
const (
	stVerified   uint32 = 1 << iota // answered eth_chainId with the configured chain id
	stWrongChain                    // answered another chain id: out of rotation until it answers the right one
	stEjected                       // out of rotation until a probe after the cooldown succeeds
)

// node is one upstream node of a pool. The hot path reads its atomics only; state changes
// happen under mu.
type node struct {
	pool     *Pool
	bit      uint64 // 1 << index within the pool
	name     string // metric label and log field: "<chain>-<index>" or "embedded"
	endpoint string // scheme://host, or "embedded": safe to log
	t        transport
	co       *coalescer // nil: every call goes alone (embedded nodes, batching off)
	log      *zap.Logger
	m        *nodeMetrics

	state        atomic.Uint32
	head         atomic.Uint64
	ewma         atomic.Int64 // latency, nanoseconds; 0 until the first answer
	fails        atomic.Int32 // consecutive failures of forwarded requests
	pollFails    atomic.Int32 // consecutive failures of checks and head polls
	ejectedUntil atomic.Int64 // unix nanoseconds; meaningful while stEjected is set
	wrongID      atomic.Uint64
	// batchChecks: the head poll of a node in rotation asks eth_chainId and eth_blockNumber
	// in one JSON-RPC batch; cleared for good when the node refuses it (then two calls).
	batchChecks atomic.Bool

	mu sync.Mutex // serializes state transitions
}

// NodeStatus is a snapshot of one node, for tests, logs and the admin API.
type NodeStatus struct {
	Name     string
	Endpoint string // scheme://host or "embedded"; never userinfo, path or query
	// Healthy: verified, not ejected and within maxLag of the best head.
	Healthy bool
	// Verified: the node answered eth_chainId with the pool's chain id.
	Verified bool
	// WrongChain: the node answered another chain id (WrongChainID); it is out of rotation
	// until it answers the pool's chain id again.
	WrongChain   bool
	WrongChainID uint64
	Head         uint64
	Lag          uint64
	Latency      time.Duration // EWMA of answered requests
	Failures     int           // consecutive failures of forwarded requests
	PollFailures int           // consecutive failures of checks and head polls
	// EjectedUntil is when the ejected node will next be probed; zero when not ejected.
	// A node stays out of rotation past it until a probe succeeds.
	EjectedUntil time.Time
}

const ewmaWeight = 5 // new = old + (sample-old)/ewmaWeight, i.e. alpha 0.2

// succeeded records an answer (a result or a JSON-RPC error) that took d, to a forwarded
// request or (poll) to a check or head poll.
func (n *node) succeeded(d time.Duration, poll bool) {
	fails := &n.fails
	if poll {
		fails = &n.pollFails
	}
	if fails.Load() != 0 {
		fails.Store(0)
	}
	old := n.ewma.Load()
	if old == 0 {
		n.ewma.Store(int64(d))
		return
	}
	n.ewma.Store(old + (int64(d)-old)/ewmaWeight)
}

// failed records a failure of a forwarded request or (poll) of a check or head poll.
// EjectAfter consecutive failures of either kind eject the node. The kinds are counted
// apart: a node that answers its head polls but fails every read must still be ejected,
// and an idle node is ejected by its failing polls alone.
func (n *node) failed(poll bool) {
	fails := &n.fails
	if poll {
		fails = &n.pollFails
	}
	if int(fails.Add(1)) >= n.pool.ejectAfter {
		n.eject()
	}
}

// eject takes a verified node out of rotation for the cooldown.
func (n *node) eject() {
	n.mu.Lock()
	st := n.state.Load()
	if st&stVerified == 0 || st&(stWrongChain|stEjected) != 0 {
		n.mu.Unlock()
		return
	}
	n.ejectedUntil.Store(time.Now().Add(n.pool.cooldown).UnixNano())
	n.state.Store(st | stEjected)
	n.mu.Unlock()
	n.m.ejections.Inc()
	n.log.Warn("upstream node ejected", zap.Int32("consecutive_failures", n.fails.Load()),
		zap.Int32("consecutive_poll_failures", n.pollFails.Load()), zap.Duration("cooldown", n.pool.cooldown))
	n.pool.refresh()
}

// readmit returns an ejected node to rotation after a successful probe.
func (n *node) readmit() {
	n.mu.Lock()
	st := n.state.Load()
	if st&stEjected == 0 || st&stWrongChain != 0 {
		n.mu.Unlock()
		return
	}
	n.fails.Store(0)
	n.pollFails.Store(0)
	n.state.Store(st &^ stEjected)
	n.mu.Unlock()
	n.log.Info("upstream node back in rotation", zap.Uint64("head", n.head.Load()))
	n.pool.refresh()
}

// reject takes the node out of rotation (or keeps it out) as serving another chain, at start
// or at any later check. It is logged once per change of chain, at error level: a node that
// moves to another chain under its URL is a misconfiguration someone must see. The node's
// poller keeps asking it eth_chainId; verify readmits it once it answers the pool's id.
func (n *node) reject(got uint64) {
	n.mu.Lock()
	st := n.state.Load()
	if st&stWrongChain != 0 && n.wrongID.Load() == got {
		n.mu.Unlock()
		return
	}
	n.wrongID.Store(got)
	n.state.Store(stWrongChain)
	n.mu.Unlock()
	n.log.Error("upstream node serves another chain; out of rotation until it serves this one",
		zap.Uint64("want_chain_id", n.pool.chainID), zap.Uint64("got_chain_id", got),
		zap.Bool("was_in_rotation", st&stVerified != 0))
	n.pool.refresh()
}

// verify puts the node in rotation once it answered eth_chainId with the pool's chain id:
// at start, after it was down, or after it served another chain.
func (n *node) verify() {
	n.mu.Lock()
	st := n.state.Load()
	if st&stVerified != 0 {
		n.mu.Unlock()
		return
	}
	n.fails.Store(0)
	n.pollFails.Store(0)
	n.state.Store(stVerified)
	n.mu.Unlock()
	if st&stWrongChain != 0 {
		n.log.Warn("upstream node serves this chain again; back in rotation",
			zap.Uint64("chain_id", n.pool.chainID), zap.Uint64("head", n.head.Load()))
	} else {
		n.log.Info("upstream node verified", zap.Uint64("head", n.head.Load()))
	}
	n.pool.refresh()
}

var errWrongChain = errors.New("node serves another chain")

// checkChain asks the node for eth_chainId: nil when it matches; errWrongChain (and the node
// is rejected) when it does not.
func (n *node) checkChain(ctx context.Context) error {
	res, err := n.pool.call(ctx, n, "eth_chainId", nil)
	if err != nil {
		return err
	}
	return n.matchChain(res)
}

// matchChain reads an eth_chainId result: nil when it is the pool's chain id; errWrongChain
// (and the node is rejected) when it is another.
func (n *node) matchChain(res []byte) error {
	got, err := parseHexQuantity(res)
	if err != nil {
		return fmt.Errorf("eth_chainId: %w", err)
	}
	if got != n.pool.chainID {
		n.reject(got)
		return errWrongChain
	}
	return nil
}

// pollHead asks the node for eth_blockNumber and records it.
func (n *node) pollHead(ctx context.Context) error {
	res, err := n.pool.call(ctx, n, "eth_blockNumber", nil)
	if err != nil {
		return err
	}
	return n.recordHead(res)
}

// recordHead reads an eth_blockNumber result and records it as the node's head.
func (n *node) recordHead(res []byte) error {
	h, err := parseHexQuantity(res)
	if err != nil {
		return fmt.Errorf("eth_blockNumber: %w", err)
	}
	n.head.Store(h)
	n.m.head.Set(float64(h))
	n.pool.refresh()
	return nil
}

// poll is the head poll of a node in rotation, which checks its chain id too: a node that
// moved to another chain under its URL leaves rotation at the poll that sees it (its head is
// then not recorded). Both calls go in one JSON-RPC batch, one round trip; to a node that
// refused that batch, as two calls.
func (n *node) poll(ctx context.Context) error {
	if n.batchChecks.Load() {
		res, err := n.pool.checks(ctx, n)
		switch {
		case errors.Is(err, errBatchRefused):
			n.batchChecks.Store(false)
			n.log.Info("upstream node refused the batch of its head poll; eth_chainId and eth_blockNumber go as two calls from now on")
		case err != nil:
			return err
		case res[0].Err != nil:
			return fmt.Errorf("eth_chainId: %w", res[0].Err)
		default:
			if err := n.matchChain(res[0].Result); err != nil {
				return err
			}
			if res[1].Err != nil {
				return fmt.Errorf("eth_blockNumber: %w", res[1].Err)
			}
			return n.recordHead(res[1].Result)
		}
	}
	if err := n.checkChain(ctx); err != nil {
		return err
	}
	return n.pollHead(ctx)
}

// probe checks the chain id and then the head. A node becomes verified once eth_chainId
// matched, even when the head poll then failed, but only after that poll: a node joins
// with its head known whenever it answers.
func (n *node) probe(ctx context.Context) error {
	if err := n.checkChain(ctx); err != nil {
		return err
	}
	err := n.pollHead(ctx)
	n.verify()
	return err
}

// tick is one round of the node's poller.
func (n *node) tick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*n.pool.timeout)
	defer cancel()
	st := n.state.Load()
	switch {
	case st&stVerified == 0:
		// Down (or not answering) at start, or serving another chain: check it again (only
		// eth_chainId while the chain is wrong).
		if err := n.probe(ctx); err != nil && !errors.Is(err, errWrongChain) {
			n.debug("upstream node still unverified", err)
		}
	case st&stEjected != 0:
		if time.Now().UnixNano() < n.ejectedUntil.Load() {
			return
		}
		if err := n.probe(ctx); err != nil {
			n.ejectedUntil.Store(time.Now().Add(n.pool.cooldown).UnixNano())
			n.debug("upstream node failed its probe; ejected for another cooldown", err)
			return
		}
		n.readmit()
	default:
		if err := n.poll(ctx); err != nil && !errors.Is(err, errWrongChain) {
			n.debug("upstream head poll failed", err)
		}
	}
}

// run runs the node's poller until ctx is done.
func (n *node) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.tick(ctx)
	}
}

func (n *node) debug(msg string, err error) {
	if ce := n.log.Check(zap.DebugLevel, msg); ce != nil {
		ce.Write(zap.Error(err))
	}
}

// healthy reports whether the node is in rotation: verified, not ejected, within maxLag.
func (n *node) healthy(best uint64) bool {
	return n.state.Load() == stVerified && lag(best, n.head.Load()) <= n.pool.maxLag
}

func lag(best, head uint64) uint64 {
	if head >= best {
		return 0
	}
	return best - head
}

func (n *node) status() NodeStatus {
	best := n.pool.best.Load()
	st := n.state.Load()
	s := NodeStatus{
		Name:         n.name,
		Endpoint:     n.endpoint,
		Healthy:      n.healthy(best),
		Verified:     st&stVerified != 0,
		WrongChain:   st&stWrongChain != 0,
		Head:         n.head.Load(),
		Latency:      time.Duration(n.ewma.Load()),
		Failures:     int(n.fails.Load()),
		PollFailures: int(n.pollFails.Load()),
	}
	s.Lag = lag(best, s.Head)
	if s.WrongChain {
		s.WrongChainID = n.wrongID.Load()
	}
	if st&stEjected != 0 {
		s.EjectedUntil = time.Unix(0, n.ejectedUntil.Load())
	}
	return s
}
