// Package upstreams holds the per-chain pools of upstream EVM nodes that web3gate forwards
// JSON-RPC calls to: one fasthttp client per node (or an in-process handler for the embedded
// dev chain), chain-id verification, head tracking, health, selection, retries and failover.
//
// Node names, used as the `node` label of metrics and the `node` field of logs, are
// "<chain name>-<index in urls>" for http(s) URLs and "embedded" for the embedded handler.
// URLs are never logged nor used as labels: they may carry API keys in their userinfo,
// path or query; logs show scheme://host only.
//
// Life cycle of a node: unverified until it answers eth_chainId with its chain's id (checked
// by Start, then by its poller every pollInterval while it fails); in rotation while
// verified, its chain id checked again with every head poll; out of rotation while it
// answers another id (at start or at any poll: logged at error level, asked eth_chainId
// every pollInterval, back in rotation once it answers its chain's id); ejected for the
// cooldown after ejectAfter consecutive failures (of requests or polls), and back in
// rotation once a probe (eth_chainId, then eth_blockNumber) after the cooldown succeeds.
package upstreams

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Deps are the dependencies of New.
type Deps struct {
	Logger *zap.Logger // named by the caller; nil: no logs
	// Registry receives the web3gate_upstream_* metrics; nil: they are not registered.
	Registry prometheus.Registerer
	// Embedded are the in-process JSON-RPC handlers by chain id, for urls "embedded".
	Embedded map[uint64]http.Handler
	// TrackFinality starts one finality poll per chain (Pool.Finality): the latest block's
	// number and hash and the finalized block, every pollInterval. Off: Pool.Finality is
	// never known.
	TrackFinality bool
	// FinalityDepth is the depth of chains whose finalityDepth is 0; 0: DefaultFinalityDepth.
	FinalityDepth uint64
	// Tracer makes the spans of forwarded calls and their attempts, and has each attempt's
	// request carry a traceparent (trace.go); nil: tracing off.
	Tracer trace.Tracer
}

// Set is every configured chain's pool.
type Set struct {
	cfg     Config
	log     *zap.Logger
	pools   []*Pool
	byChain map[uint64]*Pool
	mainnet *Pool

	mu      sync.Mutex // guards started and cancel
	started bool
	cancel  context.CancelFunc

	closed   atomic.Bool
	pollers  sync.WaitGroup
	inflight sync.WaitGroup // exchanges running aside after their caller stopped waiting
}

// New builds the pools of cfg (defaults applied to unset fields, then validated). No request
// is sent before Start.
func New(cfg Config, deps Deps) (*Set, error) {
	cfg.Chains = append([]ChainConfig(nil), cfg.Chains...)
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("upstreams config: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	m := newMetrics(deps.Registry)
	var finGauge *prometheus.GaugeVec
	if deps.TrackFinality {
		finGauge = newFinalityGauge(deps.Registry)
	}
	s := &Set{cfg: cfg, log: log, byChain: make(map[uint64]*Pool, len(cfg.Chains))}
	for i, ch := range cfg.Chains {
		p := &Pool{
			set:         s,
			chainID:     ch.ChainID,
			name:        ch.Name,
			log:         log.With(zap.String("chain", ch.Name)),
			timeout:     cfg.Timeout,
			maxAttempts: cfg.MaxAttempts,
			maxLag:      *cfg.MaxLag,
			ejectAfter:  cfg.EjectAfter,
			cooldown:    cfg.Cooldown,
			tracer:      deps.Tracer,
		}
		if deps.TrackFinality {
			p.fin = newFinality(ch, deps.FinalityDepth, finGauge)
		}
		for k, raw := range ch.URLs {
			n := &node{pool: p, bit: 1 << k, endpoint: redactURL(raw)}
			if raw == EmbeddedURL {
				h := deps.Embedded[ch.ChainID]
				if h == nil {
					return nil, fmt.Errorf("chains[%d].urls[%d]: no embedded handler for chain %d", i, k, ch.ChainID)
				}
				n.name = EmbeddedURL
				n.t = &embeddedTransport{h: h, limit: cfg.MaxResponseBytes, wg: &s.inflight, log: p.log, propagate: deps.Tracer != nil}
			} else {
				t, err := newHTTPTransport(raw, &s.cfg, &s.inflight)
				if err != nil {
					return nil, fmt.Errorf("chains[%d].urls[%d]: %w", i, k, err)
				}
				n.name = ch.Name + "-" + strconv.Itoa(k)
				t.propagate = deps.Tracer != nil
				n.t = t
			}
			n.log = p.log.With(zap.String("node", n.name), zap.String("endpoint", n.endpoint))
			n.m = m.forNode(ch.Name, n.name)
			if t, ok := n.t.(*httpTransport); ok && cfg.Batch.Enabled {
				n.co = &coalescer{t: t, maxInFlight: cfg.Batch.MaxInFlight, maxBatch: cfg.Batch.MaxSize,
					wg: &s.inflight, log: n.log, batches: n.m.batch, yield: runtime.Gosched}
			}
			// The in-process handler takes batches; an http(s) node only when batching is on.
			n.batchChecks.Store(raw == EmbeddedURL || n.co != nil)
			n.m.healthy.Set(0)
			p.nodes = append(p.nodes, n)
		}
		// The chain's hedge series exist at 0 from the start, hedging or not (one node).
		for _, o := range []string{"won", "lost", "capped"} {
			m.hedges.WithLabelValues(ch.Name, o)
		}
		if cfg.Hedge.Enabled && len(p.nodes) > 1 && cfg.MaxAttempts > 1 {
			p.hedge = newHedger(cfg.Hedge, len(p.nodes), m, ch.Name)
		}
		p.logs = newLogsConf(cfg.GetLogs, cfg.MaxResponseBytes, len(p.nodes), m, ch.Name)
		s.pools = append(s.pools, p)
		s.byChain[ch.ChainID] = p
	}
	s.mainnet = s.byChain[cfg.Mainnet]
	return s, nil
}

// Start checks every node's chain id and polls its head once, all nodes concurrently and
// bounded by the timeout, then starts one poller per node and returns. Nodes that did not
// answer, or answered another chain id, are checked again by their pollers. Pollers run
// until Close or until ctx is done. Start runs once; later calls do nothing.
func (s *Set) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed.Load() {
		return
	}
	s.started = true
	pctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel

	var wg sync.WaitGroup
	for _, p := range s.pools {
		for _, n := range p.nodes {
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
				defer cancel()
				switch err := n.probe(cctx); {
				case errors.Is(err, errWrongChain):
				case n.state.Load()&stVerified == 0:
					n.log.Warn("upstream node unavailable at start; it will be checked again", zap.Error(err))
				case err != nil:
					n.log.Warn("upstream head poll failed at start", zap.Error(err))
				}
			})
		}
	}
	wg.Wait()

	for _, p := range s.pools {
		p.refresh()
		for _, n := range p.nodes {
			s.pollers.Go(func() { n.run(pctx, s.cfg.PollInterval) })
		}
		if p.fin != nil {
			s.pollers.Go(func() { p.runFinality(pctx, s.cfg.PollInterval) })
		}
		healthy := 0
		best := p.best.Load()
		for _, n := range p.nodes {
			if n.healthy(best) {
				healthy++
			}
		}
		lvl := zap.InfoLevel
		if healthy == 0 {
			lvl = zap.WarnLevel
		}
		p.log.Log(lvl, "upstream pool started",
			zap.Uint64("chain_id", p.chainID), zap.Int("nodes", len(p.nodes)),
			zap.Int("healthy", healthy), zap.Uint64("head", best))
	}
}

// Close stops the pollers and waits for them and for exchanges still running aside, then
// closes idle connections. It is idempotent; Forward fails after it.
func (s *Set) Close() {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	s.pollers.Wait()
	s.inflight.Wait()
	for _, p := range s.pools {
		for _, n := range p.nodes {
			n.t.closeIdle()
		}
	}
}

// Pool returns the pool of chainID.
func (s *Set) Pool(chainID uint64) (*Pool, bool) {
	p, ok := s.byChain[chainID]
	return p, ok
}

// Mainnet returns the pool that /v1/web3/mainnet serves.
func (s *Set) Mainnet() *Pool { return s.mainnet }

// Pools returns every pool in configuration order.
func (s *Set) Pools() []*Pool { return append([]*Pool(nil), s.pools...) }

// Ready is nil when every chain has at least one healthy node, else an error naming the
// chains without one.
func (s *Set) Ready() error {
	var down []string
	for _, p := range s.pools {
		if !p.healthy() {
			down = append(down, p.name+" ("+strconv.FormatUint(p.chainID, 10)+")")
		}
	}
	if len(down) == 0 {
		return nil
	}
	return fmt.Errorf("no healthy upstream node for chain %s", strings.Join(down, ", "))
}
