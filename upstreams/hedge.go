package upstreams

import (
	"context"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Hedged reads. A pure read (see hedgeable) that the chosen node has not answered after its
// hedge delay is sent to the next node as well (pick with the first excluded); the first
// answer wins and the other attempt is canceled. The delay is the chosen node's recent
// answer latency at upstreams.hedge.quantile (see latencies), bounded by minDelay and
// maxDelay; a node with too few recent answers gets maxDelay. The chosen node's JSON-RPC
// error is its answer: not hedged, and it wins when it comes first. The second node's error
// does not end the first attempt (that node may be behind: "unknown block"); it is the
// answer only when the first attempt fails. Only the first attempt of a read is
// hedged: when both attempts fail, the read fails over to the other nodes as any read does,
// the hedge counting as one of its maxAttempts. Hedges are capped by a token bucket filled
// by the hedgeable reads themselves: each adds maxExtra of a token (up to hedgeBurst
// tokens), each hedge takes one, so hedges never exceed maxExtra of the reads. A pool with
// one node never hedges; batches (ForwardBatch) are never hedged.

// hedgeable reports whether method may be hedged: the pure reads (jsonrpc.PureRead, which the
// cache stage coalesces too) and the chain's constants. Nothing with side effects
// (eth_sendRawTransaction, eth_sendTransaction), nothing that creates or reads state held by
// one node (filters, subscriptions).
func hedgeable(method string) bool {
	return jsonrpc.PureRead(method) || method == "eth_chainId" || method == "net_version"
}

// hedgeBurst is the most hedges that reads can save up for a burst of slow answers.
const hedgeBurst = 10

// milli is the unit of the hedge bucket: a thousandth of a hedge.
const milli = 1000

// hedger is the hedging of one pool: the nodes' latency estimates and the hedge bucket.
type hedger struct {
	cfg     HedgeConfig
	lat     []latencies // by node index
	perRead int64       // bucket credit of one read, in thousandths of a hedge
	tokens  atomic.Int64

	won, lost, capped prometheus.Counter

	bufs atomic.Int64 // answer buffers held by hedges (tests check they all come back)
}

func newHedger(cfg HedgeConfig, nodes int, m *metrics, chain string) *hedger {
	h := &hedger{cfg: cfg, lat: make([]latencies, nodes), perRead: int64(math.Round(cfg.MaxExtra * milli))}
	for i := range h.lat {
		h.lat[i].q = cfg.Quantile
	}
	h.won = m.hedges.WithLabelValues(chain, "won")
	h.lost = m.hedges.WithLabelValues(chain, "lost")
	h.capped = m.hedges.WithLabelValues(chain, "capped")
	return h
}

// credit adds one read's share to the bucket.
func (h *hedger) credit() {
	for {
		v := h.tokens.Load()
		next := min(v+h.perRead, hedgeBurst*milli)
		if next == v || h.tokens.CompareAndSwap(v, next) {
			return
		}
	}
}

// take takes one hedge from the bucket; false when the bucket holds less than one.
func (h *hedger) take() bool {
	for {
		v := h.tokens.Load()
		if v < milli {
			return false
		}
		if h.tokens.CompareAndSwap(v, v-milli) {
			return true
		}
	}
}

// delay is how long a read waits for n before it is hedged.
func (h *hedger) delay(n *node) time.Duration {
	d := h.lat[nodeIndex(n)].estimate()
	if d == 0 {
		return h.cfg.MaxDelay
	}
	return min(max(d, h.cfg.MinDelay), h.cfg.MaxDelay)
}

// observe records the latency of an answer of n.
func (h *hedger) observe(n *node, d time.Duration) { h.lat[nodeIndex(n)].observe(d) }

func nodeIndex(n *node) int { return bits.TrailingZeros64(n.bit) }

// Sizes of the latency estimate: the latest latencyWindow answers; the quantile is computed
// again every latencyEvery answers, and known once latencyMinSamples are in.
const (
	latencyWindow     = 128
	latencyEvery      = 16
	latencyMinSamples = 8
)

// latencies estimates a quantile of one node's recent answer latencies: a ring of the
// latest latencyWindow samples, whose quantile (nearest rank) is computed again every
// latencyEvery samples (while warming up, at every sample) and read with one atomic load.
// Recording costs a short critical section; the sort of at most 128 values runs outside it.
type latencies struct {
	q     float64
	mu    sync.Mutex
	ring  [latencyWindow]int64
	n     int // samples in ring
	next  int // index of the next sample
	since int // samples since the last computation
	est   atomic.Int64
}

func (l *latencies) observe(d time.Duration) {
	l.mu.Lock()
	l.ring[l.next] = int64(d)
	l.next = (l.next + 1) % latencyWindow
	l.n = min(l.n+1, latencyWindow)
	l.since++
	if l.n < latencyMinSamples || l.since < latencyEvery && l.n >= 2*latencyEvery {
		l.mu.Unlock()
		return
	}
	l.since = 0
	var snap [latencyWindow]int64
	n := copy(snap[:], l.ring[:l.n])
	l.mu.Unlock()
	l.est.Store(quantile(snap[:n], l.q))
}

// estimate is the latest quantile, 0 before latencyMinSamples samples.
func (l *latencies) estimate() time.Duration { return time.Duration(l.est.Load()) }

// quantile sorts s and returns its q-quantile by nearest rank.
func quantile(s []int64, q float64) int64 {
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// hedge is one hedged read: the second attempt, started by a timer, and its hand-off with
// the read's own (first) attempt, which runs in the caller's goroutine.
//
// Buffers: the second attempt sends a copy of the request body (the caller's buffer goes
// back to the pool as soon as the read returns) and reads its answer into a buffer of its
// own. Whoever is last to hold that buffer frees it: the caller once it took the answer
// (swapped into its own buffer) or dropped it, or the second attempt itself when it ends
// after the caller took the first attempt's answer (finished).
type hedge struct {
	p      *Pool
	first  *node
	ctx    context.Context // canceled when the read returns, or when the hedge won
	cancel context.CancelFunc
	label  string
	want   expect
	body   []byte // the caller's request body; read only under mu while !aDone

	mu       sync.Mutex
	aDone    bool // the first attempt ended: no hedge starts from now on
	launched bool
	finished bool // the caller is done with the second attempt's answer
	ready    bool // the second attempt's answer is in

	n    *node
	buf  *[]byte
	res  []byte
	o    outcome
	err  error
	done chan struct{} // capacity 1: the second attempt's answer is in
}

// fire starts the second attempt, when a node is left and the bucket holds a hedge. It runs
// in the timer's goroutine and makes the attempt there.
func (h *hedge) fire() {
	p := h.p
	h.mu.Lock()
	if h.aDone || p.set.closed.Load() {
		h.mu.Unlock()
		return
	}
	n := p.pick(h.first.bit)
	if n == nil {
		h.mu.Unlock()
		return
	}
	if !p.hedge.take() {
		h.mu.Unlock()
		p.hedge.capped.Inc()
		return
	}
	body := getBuffer()
	*body = append((*body)[:0], h.body...)
	h.launched, h.n, h.buf = true, n, getBuffer()
	p.hedge.bufs.Add(1)
	p.set.inflight.Add(1)
	h.mu.Unlock()
	defer p.set.inflight.Done()

	res, o, err := p.exchange(h.ctx, n, h.label, h.want, *body, h.buf, attemptOf{n: 2, hedge: true})
	putBuffer(body)
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		h.freeBuf()
		return
	}
	h.res, h.o, h.err, h.ready = res, o, err, true
	h.mu.Unlock()
	if o == outcomeOK {
		// The first attempt gives up: this result wins. A JSON-RPC error does not end it (a
		// node behind the other may not know the block yet): it answers only if the first
		// attempt fails.
		h.cancel()
	}
	h.done <- struct{}{}
}

// freeBuf returns the second attempt's answer buffer to the pool.
func (h *hedge) freeBuf() {
	putBuffer(h.buf)
	h.p.hedge.bufs.Add(-1)
}

// answered reports whether o is a node's answer: a result or a JSON-RPC error.
func answered(o outcome) bool { return o == outcomeOK || o == outcomeRPCError }

// hedged makes the first attempt of a hedgeable read to n, hedged to another node after n's
// hedge delay. It returns exchange's results for the answer that won (aliasing *respBuf),
// or for a failure when no attempt answered; by is the node of that answer or failure, sent
// the nodes tried.
func (p *Pool) hedged(ctx context.Context, n *node, label string, want expect, body []byte, respBuf *[]byte) (res []byte, o outcome, err error, by *node, sent uint64) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &hedge{p: p, first: n, ctx: cctx, cancel: cancel, label: label, want: want, body: body, done: make(chan struct{}, 1)}
	t := time.AfterFunc(p.hedge.delay(n), h.fire)
	res, o, err = p.exchange(cctx, n, label, want, body, respBuf, attemptOf{n: 1})
	t.Stop()

	h.mu.Lock()
	h.aDone, h.body = true, nil
	if !h.launched {
		h.mu.Unlock()
		return res, o, err, n, n.bit
	}
	sent = n.bit | h.n.bit
	if answered(o) {
		// The first attempt answered first: the hedge lost; it frees its buffer when it ends
		// (the deferred cancel ends it), unless it already has.
		h.finished = true
		ready := h.ready
		h.mu.Unlock()
		if ready {
			h.freeBuf()
		}
		p.hedge.lost.Inc()
		return res, o, err, n, sent
	}
	h.mu.Unlock()
	// The first attempt failed, or was canceled by the hedge's answer: the hedge decides.
	<-h.done
	if answered(h.o) {
		*respBuf, *h.buf = *h.buf, *respBuf // h.res aliases the answer, now the caller's buffer
		h.freeBuf()
		p.hedge.won.Inc()
		return h.res, h.o, h.err, h.n, sent
	}
	h.freeBuf()
	p.hedge.lost.Inc()
	if o == outcomeCanceled && ctx.Err() == nil {
		return nil, h.o, h.err, h.n, sent
	}
	return nil, o, err, n, sent
}
