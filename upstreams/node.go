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
	stWrongChain                    // answered another chain id: never used again
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
	// WrongChain: the node answered another chain id (WrongChainID) and is never used.
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

// reject marks the node as serving another chain. It is logged once and never used again.
func (n *node) reject(got uint64) {
	n.mu.Lock()
	st := n.state.Load()
	if st&stWrongChain != 0 {
		n.mu.Unlock()
		return
	}
	n.wrongID.Store(got)
	n.state.Store((st | stWrongChain) &^ stVerified)
	n.mu.Unlock()
	n.log.Warn("upstream node serves the wrong chain; it will not be used",
		zap.Uint64("want_chain_id", n.pool.chainID), zap.Uint64("got_chain_id", got))
	n.pool.refresh()
}

func (n *node) verify() {
	n.mu.Lock()
	st := n.state.Load()
	if st&(stVerified|stWrongChain) != 0 {
		n.mu.Unlock()
		return
	}
	n.fails.Store(0)
	n.pollFails.Store(0)
	n.state.Store(st | stVerified)
	n.mu.Unlock()
	n.log.Info("upstream node verified", zap.Uint64("head", n.head.Load()))
	n.pool.refresh()
}

var errWrongChain = errors.New("node serves another chain")

// checkChain asks the node for eth_chainId: nil when it matches; errWrongChain (and the node
// is rejected) when it does not.
func (n *node) checkChain(ctx context.Context) error {
	res, err := n.pool.call(ctx, n, "eth_chainId")
	if err != nil {
		return err
	}
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
	res, err := n.pool.call(ctx, n, "eth_blockNumber")
	if err != nil {
		return err
	}
	h, err := parseHexQuantity(res)
	if err != nil {
		return fmt.Errorf("eth_blockNumber: %w", err)
	}
	n.head.Store(h)
	n.m.head.Set(float64(h))
	n.pool.refresh()
	return nil
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

// tick is one round of the node's poller. It reports false once the node is never to be
// polled again (wrong chain).
func (n *node) tick(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*n.pool.timeout)
	defer cancel()
	st := n.state.Load()
	switch {
	case st&stWrongChain != 0:
		return false
	case st&stVerified == 0:
		// Down (or not answering) at start: check it again.
		if err := n.probe(ctx); err != nil && !errors.Is(err, errWrongChain) {
			n.debug("upstream node still unverified", err)
		}
	case st&stEjected != 0:
		if time.Now().UnixNano() < n.ejectedUntil.Load() {
			return true
		}
		if err := n.probe(ctx); err != nil {
			n.ejectedUntil.Store(time.Now().Add(n.pool.cooldown).UnixNano())
			n.debug("upstream node failed its probe; ejected for another cooldown", err)
			return n.state.Load()&stWrongChain == 0
		}
		n.readmit()
	default:
		if err := n.pollHead(ctx); err != nil {
			n.debug("upstream head poll failed", err)
		}
	}
	return n.state.Load()&stWrongChain == 0
}

// poll runs the node's poller until ctx is done.
func (n *node) poll(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !n.tick(ctx) {
			return
		}
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
