package upstreams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Finality modes of upstreams.chains[].finality.
const (
	// FinalityAuto: the `finalized` block tag while the node answers it with a block, else
	// finalityDepth below the head.
	FinalityAuto = "auto"
	// FinalityTag: the `finalized` block tag only; while the node does not answer it, no
	// block but genesis is final.
	FinalityTag = "tag"
	// FinalityDepth: finalityDepth below the head; the tag is not asked.
	FinalityDepth = "depth"
)

// DefaultFinalityDepth is the depth used when neither the chain nor Deps.FinalityDepth set one.
const DefaultFinalityDepth = 12

// Finality is what a pool knows of its chain's head and finality: the head block's number
// and hash (its identity: a reorg to another block at the same height changes the hash)
// and the highest final block. Known is false until the first poll answered.
type Finality struct {
	Known bool
	Head  uint64
	// HeadHash is the head block's hash, lowercase 0x-hex.
	HeadHash string
	// Finalized is the highest block that no reorg can replace: the node's `finalized` block,
	// or Head minus the depth (0 when the chain is shorter).
	Finalized uint64
	// ByTag: Finalized is the node's `finalized` block (else: the depth below the head).
	ByTag bool
}

// finality is a pool's finality tracker: one poll per pollInterval to the pool's best node,
// asking the latest block (number and hash) and, unless the mode is depth, the finalized
// block, in one JSON-RPC batch (two calls to a node that refuses batches).
type finality struct {
	mode  string
	depth uint64
	cur   atomic.Pointer[Finality]
	// head and final are the web3gate_upstream_finality_block gauges of the pool.
	head, final prometheus.Gauge
	// tagLogged: the node's refusal of the tag was logged (once per pool).
	tagLogged atomic.Bool
}

// newFinality is the tracker of chain ch; its gauges are children of vec.
func newFinality(ch ChainConfig, depth uint64, vec *prometheus.GaugeVec) *finality {
	if ch.FinalityDepth != 0 {
		depth = ch.FinalityDepth
	}
	if depth == 0 {
		depth = DefaultFinalityDepth
	}
	return &finality{mode: ch.Finality, depth: depth,
		head: vec.WithLabelValues(ch.Name, "head"), final: vec.WithLabelValues(ch.Name, "finalized")}
}

// newFinalityGauge is web3gate_upstream_finality_block, registered with reg (nil: not).
func newFinalityGauge(reg prometheus.Registerer) *prometheus.GaugeVec {
	return promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{
		Name: "web3gate_upstream_finality_block",
		Help: "The head (block=head) and the highest final block (block=finalized) of each chain as its finality poll last saw them: what the response cache keys its head entries by and caches as final below.",
	}, []string{"chain", "block"})
}

// Finality returns the pool's view of its head and finality (Known false before the first
// poll answered or when tracking is off: see Deps.TrackFinality).
func (p *Pool) Finality() Finality {
	if p.fin == nil {
		return Finality{}
	}
	if f := p.fin.cur.Load(); f != nil {
		return *f
	}
	return Finality{}
}

// Finalized is the highest final block of the pool's chain (0 while unknown).
func (p *Pool) Finalized() uint64 { return p.Finality().Finalized }

var (
	latestParams    = []byte(`["latest",false]`)
	finalizedParams = []byte(`["finalized",false]`)
)

// pollFinality asks one node in rotation for the latest and the finalized blocks and
// records the result.
func (p *Pool) pollFinality(ctx context.Context) error {
	n := p.pick(0)
	if n == nil {
		return errors.New("no node in rotation")
	}
	withTag := p.fin.mode != FinalityDepth
	var latest, final BatchResult
	if withTag && n.batchChecks.Load() {
		res, err := p.callPair(ctx, n, "eth_getBlockByNumber", BatchCall{Method: "eth_getBlockByNumber", Params: latestParams}, BatchCall{Method: "eth_getBlockByNumber", Params: finalizedParams})
		switch {
		case errors.Is(err, errBatchRefused):
			n.batchChecks.Store(false)
		case err != nil:
			return err
		default:
			latest, final = res[0], res[1]
		}
	}
	if latest.Result == nil && latest.Err == nil {
		res, err := p.call(ctx, n, "eth_getBlockByNumber", latestParams)
		if err != nil {
			return err
		}
		latest.Result = res
		if withTag {
			res, err := p.call(ctx, n, "eth_getBlockByNumber", finalizedParams)
			var rpcErr *jsonrpc.Error
			switch {
			case errors.As(err, &rpcErr):
				final.Err = rpcErr
			case err != nil:
				return err
			}
			final.Result = res
		}
	}
	if latest.Err != nil {
		return fmt.Errorf("latest block: %w", latest.Err)
	}
	head, hash, ok := blockIdentity(latest.Result)
	if !ok {
		return errors.New("latest block: not a block")
	}
	f := Finality{Known: true, Head: head, HeadHash: hash}
	if f.Head > p.fin.depth {
		f.Finalized = f.Head - p.fin.depth
	}
	if withTag {
		num, _, tagOK := blockIdentity(final.Result)
		switch {
		case tagOK && final.Err == nil:
			f.Finalized, f.ByTag = min(num, head), true
		case p.fin.mode == FinalityTag:
			f.Finalized = 0
			if !p.fin.tagLogged.Swap(true) {
				p.log.Warn("upstream node does not answer the finalized block tag; with finality: tag, no block but genesis is final until it does")
			}
		default:
			if !p.fin.tagLogged.Swap(true) {
				p.log.Info("upstream node does not answer the finalized block tag; finality by depth",
					zap.Uint64("depth", p.fin.depth))
			}
		}
	}
	p.fin.cur.Store(&f)
	p.fin.head.Set(float64(f.Head))
	p.fin.final.Set(float64(f.Finalized))
	return nil
}

// blockIdentity reads a block's number and hash (lowercased); ok false for null or anything
// else that is not a block.
func blockIdentity(raw []byte) (num uint64, hash string, ok bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return 0, "", false
	}
	r := gjson.GetManyBytes(raw, "number", "hash")
	if r[0].Type != gjson.String || r[1].Type != gjson.String || len(r[1].Str) != 66 {
		return 0, "", false
	}
	s := r[0].Str
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return 0, "", false
	}
	num, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		return 0, "", false
	}
	h := []byte(r[1].Str)
	for i := 2; i < len(h); i++ {
		c := h[i]
		switch {
		case 'A' <= c && c <= 'F':
			h[i] = c + 'a' - 'A'
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		default:
			return 0, "", false
		}
	}
	return num, string(h), true
}

// runFinality polls the pool's finality every `every` until ctx is done; the first poll is
// at once.
func (p *Pool) runFinality(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*p.timeout)
		if err := p.pollFinality(cctx); err != nil {
			if ce := p.log.Check(zap.DebugLevel, "finality poll failed"); ce != nil {
				ce.Write(zap.Error(err))
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
