package upstreams

import (
	"context"
	"errors"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Pool is the set of nodes of one chain. Forward is safe for concurrent use.
type Pool struct {
	set     *Set
	chainID uint64
	name    string
	nodes   []*node
	log     *zap.Logger

	timeout     time.Duration
	maxAttempts int
	maxLag      uint64
	ejectAfter  int
	cooldown    time.Duration

	hedge *hedger   // nil: hedging off, or one node
	logs  *logsConf // eth_getLogs splitting

	best   atomic.Uint64 // best head among verified, non-ejected nodes
	bestMu sync.Mutex    // serializes refresh
	nextID atomic.Uint64 // JSON-RPC ids of our upstream requests
	fin    *finality     // nil: finality not tracked (see finality.go)

	tracer trace.Tracer // nil: tracing off (trace.go)
}

// ChainID is the pool's EIP-155 chain id.
func (p *Pool) ChainID() uint64 { return p.chainID }

// Name is the pool's chain name (the `chain` label of its metrics).
func (p *Pool) Name() string { return p.name }

// Head is the best head block number among the nodes in rotation (0 before any is known).
func (p *Pool) Head() uint64 { return p.best.Load() }

// Nodes returns a snapshot of every node's state, in configuration order.
func (p *Pool) Nodes() []NodeStatus {
	out := make([]NodeStatus, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = n.status()
	}
	return out
}

// healthy reports whether at least one node is in rotation.
func (p *Pool) healthy() bool {
	best := p.best.Load()
	for _, n := range p.nodes {
		if n.healthy(best) {
			return true
		}
	}
	return false
}

// refresh recomputes the best head and every node's healthy gauge after a head or state
// change. It runs on pollers and on ejection, never per request.
func (p *Pool) refresh() {
	p.bestMu.Lock()
	defer p.bestMu.Unlock()
	var best uint64
	for _, n := range p.nodes {
		if n.state.Load() == stVerified {
			best = max(best, n.head.Load())
		}
	}
	p.best.Store(best)
	for _, n := range p.nodes {
		if n.healthy(best) {
			n.m.healthy.Set(1)
		} else {
			n.m.healthy.Set(0)
		}
	}
}

// Node tiers of pick, best first.
const (
	tierInRange = iota // in rotation and within maxLag
	tierLagging        // in rotation, more than maxLag behind: used when no node is in range
	tierEjected        // ejected: used only when every verified node is ejected
)

// pick returns the node to try next, skipping those in tried: the lowest tier, then the
// lowest lag, then the lowest latency. Ejected nodes are candidates only when no verified
// node is in rotation at all (tried or not): then the best known is tried rather than
// failing without trying. Unverified and wrong-chain nodes are never picked. It does not
// allocate.
func (p *Pool) pick(tried uint64) *node {
	best := p.best.Load()
	var (
		pick     *node
		pickTier int
		pickLag  uint64
		pickLat  int64
		live     bool
	)
	for _, n := range p.nodes {
		st := n.state.Load()
		if st&stVerified == 0 || st&stWrongChain != 0 {
			continue
		}
		tier := tierInRange
		if st&stEjected != 0 {
			tier = tierEjected
		} else {
			live = true
		}
		if tried&n.bit != 0 {
			continue
		}
		l := lag(best, n.head.Load())
		if tier == tierInRange && l > p.maxLag {
			tier = tierLagging
		}
		lat := n.ewma.Load()
		if pick == nil || tier < pickTier ||
			tier == pickTier && (l < pickLag || l == pickLag && lat < pickLat) {
			pick, pickTier, pickLag, pickLat = n, tier, l, lat
		}
	}
	if pick != nil && pickTier == tierEjected && live {
		return nil
	}
	return pick
}

// Errors of Forward besides the upstream's own and jsonrpc.ErrUpstreamTimeout. Their
// messages name no node and no URL.
var (
	errNoNode   = jsonrpc.ErrUpstreamUnavailable.With("no healthy upstream node")
	errAllFail  = jsonrpc.ErrUpstreamUnavailable.With("all upstream attempts failed")
	errTooLarge = jsonrpc.ErrUpstreamUnavailable.With("upstream response too large")
	errCanceled = jsonrpc.ErrUpstreamUnavailable.With("request canceled")
	errClosed   = jsonrpc.ErrUpstreamUnavailable.With("upstreams closed")
)

// Backoff before trying again nodes that already failed this call (e.g. the only node).
const (
	backoffBase = 50 * time.Millisecond
	backoffMax  = 500 * time.Millisecond
)

// Forward sends the JSON-RPC call method(params) to the pool and returns the raw JSON result,
// owned by the caller. params is a raw JSON array, or nil for none.
//
// Reads go to the best node (see pick); on a transport error, a timeout, a closed
// connection, HTTP 429 or 5xx, or a body that is not a JSON-RPC response, the next node is
// tried, up to MaxAttempts attempts in all; once every candidate has failed, they are tried
// again after a short backoff (so a single node is retried). eth_sendRawTransaction goes
// at most once to each node. When every verified node is ejected, the best known of them is
// still tried rather than failing without trying; unverified and wrong-chain nodes never are.
// A pure read may be hedged: sent to a second node when the first is slow (see hedge.go).
// eth_getLogs over a range larger than getLogs.chunkSize is split (see getlogs.go).
//
// The error is a *jsonrpc.Error: the upstream's JSON-RPC error passed through unchanged
// (never retried), jsonrpc.ErrUpstreamTimeout when the last failure was a timeout or ctx's
// deadline passed, else jsonrpc.ErrUpstreamUnavailable with a short reason.
func (p *Pool) Forward(ctx context.Context, method string, params []byte) ([]byte, error) {
	if p.tracer != nil {
		if tctx, span := p.startForward(ctx, method, 0); span != nil {
			res, err := p.forwardCall(tctx, method, params)
			tracing.End(span, err)
			return res, err
		}
	}
	return p.forwardCall(ctx, method, params)
}

// forwardCall is Forward without its span.
func (p *Pool) forwardCall(ctx context.Context, method string, params []byte) ([]byte, error) {
	if p.set.closed.Load() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	if method == "eth_getLogs" {
		return p.getLogs(ctx, params)
	}
	res, _, err := p.forward(ctx, method, params)
	return res, err
}

// forward is Forward without its checks and eth_getLogs splitting; n is the node of the
// answer or of the last failure (nil when none was tried).
func (p *Pool) forward(ctx context.Context, method string, params []byte) (res []byte, n *node, err error) {
	id := p.nextID.Add(1)
	reqBuf, respBuf := getBuffer(), getBuffer()
	defer putBuffer(reqBuf)
	defer putBuffer(respBuf)
	*reqBuf = appendRequest((*reqBuf)[:0], id, method, params)
	once := sentAtMostOncePerNode(method)
	hedge := p.hedge != nil && hedgeable(method)
	if hedge {
		p.hedge.credit()
	}
	res, n, err = p.attempt(ctx, jsonrpc.MethodLabel(method), once, hedge, expect{id: id, join: !once}, *reqBuf, respBuf)
	if err != nil {
		return nil, n, err
	}
	return append([]byte(nil), res...), n, nil
}

// BatchCall is one call of ForwardBatch: a method and its raw JSON params array (nil: none).
type BatchCall struct {
	Method string
	Params []byte
}

// BatchResult is the answer to one BatchCall: its raw JSON result (owned by the caller), or
// the upstream's JSON-RPC error for that call.
type BatchResult struct {
	Result []byte
	Err    *jsonrpc.Error
}

// ForwardBatch sends calls to the pool as one JSON-RPC batch, one round trip, and returns
// their answers in order. It fails over and retries like Forward: a node's answer counts only
// when it answers every call. An error for one call is that call's BatchResult.Err; the error
// returned is for the batch as a whole (as Forward's). The batch is labeled "batch" in
// metrics. A batch holding a call that goes at most once to each node (eth_sendRawTransaction)
// goes at most once to each node too.
func (p *Pool) ForwardBatch(ctx context.Context, calls []BatchCall) ([]BatchResult, error) {
	if p.tracer != nil {
		if tctx, span := p.startForward(ctx, "batch", len(calls)); span != nil {
			out, err := p.forwardBatch(tctx, calls)
			tracing.End(span, err)
			return out, err
		}
	}
	return p.forwardBatch(ctx, calls)
}

// forwardBatch is ForwardBatch without its span.
func (p *Pool) forwardBatch(ctx context.Context, calls []BatchCall) ([]BatchResult, error) {
	if p.set.closed.Load() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	if len(calls) == 0 {
		return nil, nil
	}
	n := uint64(len(calls))
	first := p.nextID.Add(n) - n + 1
	reqBuf, respBuf := getBuffer(), getBuffer()
	defer putBuffer(reqBuf)
	defer putBuffer(respBuf)
	b := append((*reqBuf)[:0], '[')
	for i, c := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRequest(b, first+uint64(i), c.Method, c.Params)
	}
	*reqBuf = append(b, ']')
	oncePerNode := false
	for _, c := range calls {
		oncePerNode = oncePerNode || sentAtMostOncePerNode(c.Method)
	}
	out := make([]BatchResult, len(calls))
	if _, _, err := p.attempt(ctx, "batch", oncePerNode, false, expect{id: first, batch: out}, *reqBuf, respBuf); err != nil {
		return nil, err
	}
	return out, nil
}

// expect is what an exchange's answer must be: the response to request id, or with batch
// set, the responses to requests id … id+len(batch)-1, parsed into batch. join marks a
// single call that may share a JSON-RPC batch with others under load (see coalescer).
type expect struct {
	id    uint64
	batch []BatchResult
	join  bool
}

// attempt runs the failover loop of Forward and ForwardBatch for one request body; with
// hedge, its first attempt is hedged (see hedged). The result aliases *respBuf. by is the
// node of the answer or of the last failure, nil when no node was tried.
func (p *Pool) attempt(ctx context.Context, label string, oncePerNode, hedge bool, want expect, body []byte, respBuf *[]byte) (result []byte, by *node, _ error) {
	var (
		tried   uint64
		last    = outcomeOK
		retries int
	)
	for attempt := 0; attempt < p.maxAttempts; attempt++ {
		n := p.pick(tried)
		if n == nil && tried != 0 && !oncePerNode {
			// Every candidate failed this call: back off, then go round again.
			if err := sleepCtx(ctx, min(backoffBase<<retries, backoffMax)); err != nil {
				return nil, by, ctxError(err)
			}
			retries++
			tried = 0
			n = p.pick(0)
		}
		if n == nil {
			break
		}
		var (
			res []byte
			o   outcome
			err error
		)
		if hedge && attempt == 0 {
			var sent uint64
			res, o, err, by, sent = p.hedged(ctx, n, label, want, body, respBuf)
			tried |= sent
			attempt += bits.OnesCount64(sent) - 1 // the hedge was an attempt too
		} else {
			tried |= n.bit
			by = n
			res, o, err = p.exchange(ctx, n, label, want, body, respBuf, attemptOf{n: attempt + 1})
		}
		switch {
		case o == outcomeOK:
			return res, by, nil
		case o == outcomeRPCError:
			return nil, by, err
		case o == outcomeCanceled:
			return nil, by, ctxError(err)
		case errors.Is(err, errResponseTooLarge):
			return nil, by, errTooLarge
		case o == outcomeTimeout && deadlinePassed(ctx):
			return nil, by, jsonrpc.ErrUpstreamTimeout
		}
		last = o
	}
	switch {
	case tried == 0 && last == outcomeOK:
		return nil, by, errNoNode
	case last == outcomeTimeout:
		return nil, by, jsonrpc.ErrUpstreamTimeout
	default:
		return nil, by, errAllFail
	}
}

// call is an internal request of the pool (chain id check, head poll, finality poll): one
// attempt of method with params (nil: none) to n, the result copied; a JSON-RPC error is
// returned as the *jsonrpc.Error.
func (p *Pool) call(ctx context.Context, n *node, method string, params []byte) ([]byte, error) {
	id := p.nextID.Add(1)
	reqBuf, respBuf := getBuffer(), getBuffer()
	defer putBuffer(reqBuf)
	defer putBuffer(respBuf)
	*reqBuf = appendRequest((*reqBuf)[:0], id, method, params)
	res, o, err := p.exchange(ctx, n, jsonrpc.MethodLabel(method), expect{id: id}, *reqBuf, respBuf, attemptOf{})
	if o != outcomeOK {
		return nil, err
	}
	return append([]byte(nil), res...), nil
}

// checks asks n for eth_chainId and eth_blockNumber in one JSON-RPC batch: one attempt,
// the results copied, labeled eth_blockNumber in metrics (it is the head poll).
// errBatchRefused when the node answered with something other than a batch answer; that is
// not counted against it.
func (p *Pool) checks(ctx context.Context, n *node) ([]BatchResult, error) {
	return p.callPair(ctx, n, "eth_blockNumber", BatchCall{Method: "eth_chainId"}, BatchCall{Method: "eth_blockNumber"})
}

// callPair asks n for two calls in one JSON-RPC batch, as the pool's own polls do: one
// attempt, the results copied, labeled label in metrics. errBatchRefused when the node
// answered with something other than a batch answer.
func (p *Pool) callPair(ctx context.Context, n *node, label string, a, b BatchCall) ([]BatchResult, error) {
	first := p.nextID.Add(2) - 1
	reqBuf, respBuf := getBuffer(), getBuffer()
	defer putBuffer(reqBuf)
	defer putBuffer(respBuf)
	body := append((*reqBuf)[:0], '[')
	body = appendRequest(body, first, a.Method, a.Params)
	body = append(body, ',')
	body = appendRequest(body, first+1, b.Method, b.Params)
	*reqBuf = append(body, ']')
	out := make([]BatchResult, 2)
	if _, o, err := p.exchange(ctx, n, jsonrpc.MethodLabel(label), expect{id: first, batch: out}, *reqBuf, respBuf, attemptOf{}); o != outcomeOK {
		return nil, err
	}
	return out, nil
}

// exchange makes one attempt of body to n, records its metrics and the node's health, and
// classifies it; at numbers it (at.n 0: the pool's own checks and head polls). On
// outcomeOK, result aliases *buf; on outcomeRPCError, err is the upstream's *jsonrpc.Error;
// otherwise err says what failed.
func (p *Pool) exchange(ctx context.Context, n *node, label string, want expect, body []byte, buf *[]byte, at attemptOf) (result []byte, o outcome, err error) {
	poll := at.n == 0
	var span trace.Span
	if p.tracer != nil && !poll {
		ctx, span = p.startAttempt(ctx, n, label, at)
	}
	start := time.Now()
	deadline := start.Add(p.timeout)
	ctxBound := false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxBound = d, true
	}
	var (
		status int
		out    []byte
	)
	if want.join && n.co != nil {
		status, out, err = n.co.roundTrip(ctx, deadline, want.id, body, (*buf)[:0])
	} else {
		status, out, err = n.t.roundTrip(ctx, deadline, body, (*buf)[:0])
	}
	*buf = out
	elapsed := time.Since(start)

	counts := true // whether a failure counts against the node
	switch {
	case err == nil && (status == 429 || status >= 500):
		o, err = outcomeHTTPError, httpStatusError(status)
	case err == nil:
		var rpcErr *jsonrpc.Error
		if want.batch != nil {
			rpcErr, err = parseBatchResponse(out, want.id, want.batch)
		} else {
			result, rpcErr, err = parseResponse(out, want.id)
		}
		switch {
		case poll && want.batch != nil && (rpcErr != nil || errors.Is(err, errNotResponse) || status/100 == 4):
			// The pool's own batch (see checks), refused as the coalescer sees refusals: one
			// error object, another JSON value, a client error. The checks go one by one.
			o, err, counts = outcomeBadResponse, errBatchRefused, false
		case err != nil && status/100 != 2:
			o, err = outcomeHTTPError, httpStatusError(status)
		case err != nil:
			o = outcomeBadResponse
		case status/100 != 2 && rpcErr == nil:
			o, err = outcomeHTTPError, httpStatusError(status)
		case rpcErr != nil:
			o, err = outcomeRPCError, rpcErr
		default:
			o = outcomeOK
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		o, counts = outcomeCanceled, false
		if errors.Is(err, context.DeadlineExceeded) {
			o = outcomeTimeout
		}
	case errors.Is(err, errAttemptTimeout):
		// A deadline set by the caller's context is no fault of the node.
		o, counts = outcomeTimeout, !ctxBound
	case errors.Is(err, errResponseTooLarge):
		// Our limit, not the node's fault; no other node would do better.
		o, counts = outcomeBadResponse, false
	case errors.Is(err, errBatchRefused):
		// The batch, not the call, was refused: the call fails over and goes alone.
		o, counts = outcomeBadResponse, false
	case errors.Is(err, errBusy):
		// Our own connection limit: ejecting the node would only move the load.
		o, counts = outcomeTransportError, false
	default:
		o = outcomeTransportError
	}

	n.m.request(label, o)
	n.m.duration.Observe(elapsed.Seconds())
	switch {
	case o == outcomeOK || o == outcomeRPCError:
		n.succeeded(elapsed, poll)
		if !poll && p.hedge != nil {
			p.hedge.observe(n, elapsed)
		}
	case counts:
		n.failed(poll)
	}
	if span != nil {
		endAttempt(span, status, o, err)
	}
	if o != outcomeOK && o != outcomeRPCError {
		if ce := n.log.Check(zap.DebugLevel, "upstream attempt failed"); ce != nil {
			// req_id: the client request the attempt was for ("" for the pool's own polls).
			ce.Write(proxy.RequestIDField(ctx), zap.String("method", label), zap.Stringer("outcome", o),
				zap.Error(err), zap.Duration("elapsed", elapsed))
		}
	}
	return result, o, err
}

type httpStatusError int

func (e httpStatusError) Error() string { return "upstream answered HTTP " + strconv.Itoa(int(e)) }

// ctxError maps the caller's context error to the error Forward returns.
func ctxError(err error) *jsonrpc.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return jsonrpc.ErrUpstreamTimeout
	}
	return errCanceled
}

// deadlinePassed reports whether ctx's deadline, if any, has passed.
func deadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pooled byte buffers for request and response bodies. Buffers that grew past
// maxPooledBuffer (a large eth_getLogs answer) are left to the collector.
const maxPooledBuffer = 1 << 20

var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuffer() *[]byte { return bufferPool.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	bufferPool.Put(b)
}
