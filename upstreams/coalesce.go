package upstreams

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// coalescer sends the calls for one node as JSON-RPC batches when several are about to go:
// one HTTP exchange for many calls. At most maxInFlight exchanges are in flight. A call that
// takes a free slot yields once and leads the calls queued meanwhile (see roundTrip); a lone
// call goes out in its caller's goroutine, exactly as without a coalescer, so an idle node
// sees no batch. At the limit, calls queue; each time an exchange ends, the queue (up to
// maxBatch calls) leaves as one batch in the freed slot. Under load this divides the HTTP
// and system-call cost of both web3gate and the node by the batch size; it is what eRPC
// calls upstream batching, without its wait window.
//
// Each queued call keeps its own request id (the pool's counter makes ids unique), so the
// batch's answer is split by id and every caller gets its own response object, as if it had
// been sent alone: the failover loop then judges each call on its own. A call the answer
// lacks gets an empty body (a bad response: it fails over). A node that answers a batch with
// something other than an array, or with a client error, does not take batches: coalescing
// is switched off for it, the calls of that batch fail over without counting against the
// node, and its calls go one by one from then on.
// errBatchRefused is the attempt error of the calls of a batch the node refused: they fail
// over (and go alone from then on) without counting against the node.
var errBatchRefused = errors.New("upstream node does not take JSON-RPC batches")

type coalescer struct {
	t           *httpTransport
	maxInFlight int
	maxBatch    int
	wg          *sync.WaitGroup
	log         *zap.Logger
	batches     func(size int) // metrics: one batch of size calls sent
	yield       func()         // a leading call's yield: runtime.Gosched (tests replace it)

	off atomic.Bool // the node refused a batch

	mu        sync.Mutex
	inFlight  int       // exchanges in flight, at most maxInFlight
	gathering bool      // a leading call is yielding: arriving calls queue for its batch
	queue     []*joined // calls waiting for a slot, oldest first
}

// joined is one call that travels in a batch. A call whose context nothing can cancel is
// owned by the batch: its caller waits until the answer is delivered, so the batch uses the
// caller's request body and appends the answer to the caller's buffer, and the call waits
// without a timer (exchange enforces its deadline); owned calls are recycled. A cancelable
// call may leave: its request is a copy, its answer a buffer of its own, its deadline its
// own timer, and a caller that gives up (its context done) simply leaves it behind.
type joined struct {
	id       uint64
	body     []byte
	dst      []byte // the answer is appended here: the caller's buffer when owned, else nil
	deadline time.Time
	owned    bool
	// sc is the span context of the call's attempt (tracing.enabled): the traceparent of the
	// exchange it leaves in, when it is the first of it that has one.
	sc    trace.SpanContext
	state atomic.Uint32 // joinWaiting, then joinDelivered or joinAbandoned
	done  chan struct{} // capacity 1: signalled on delivery

	status int
	out    []byte
	err    error
}

const (
	joinWaiting uint32 = iota
	joinDelivered
	joinAbandoned
)

var joinedPool = sync.Pool{New: func() any { return &joined{done: make(chan struct{}, 1)} }}

// ownedCall returns a recycled joined for an owned call.
func ownedCall(id uint64, body, dst []byte, deadline time.Time) *joined {
	j := joinedPool.Get().(*joined)
	j.id, j.body, j.dst, j.deadline, j.owned = id, body, dst, deadline, true
	return j
}

// result returns an owned call's answer, in the contract of transport.roundTrip, and
// recycles j.
func (j *joined) result() (int, []byte, error) {
	status, out, err := j.status, j.out, j.err
	switch {
	case err != nil:
		status, out = 0, j.dst
	case out == nil:
		out = j.dst // the batch answer lacked the call: an empty body
	}
	*j = joined{done: j.done}
	joinedPool.Put(j)
	return status, out, err
}

// roundTrip sends the single JSON-RPC request body with the given id to the node, alone when
// a slot is free, else in the next batch. It has the contract of transport.roundTrip.
//
// A call that takes a free slot first yields its goroutine once (runtime.Gosched) and then
// leads: it sends, in one exchange, its own request and the calls that other goroutines,
// runnable at that moment, queued meanwhile. Alone (an idle node, a lone client) it goes
// as it came, a yield later; under load the calls of the goroutines the network poller
// woke together leave together, without a wait window.
func (c *coalescer) roundTrip(ctx context.Context, deadline time.Time, id uint64, body, dst []byte) (int, []byte, error) {
	if c.off.Load() {
		return c.t.roundTrip(ctx, deadline, body, dst)
	}
	owned := ctx.Done() == nil
	c.mu.Lock()
	if c.inFlight < c.maxInFlight && !c.gathering {
		c.inFlight++
		var batch []*joined
		if owned {
			// Only a call that nothing can cancel leads a batch: the batch is not its own.
			c.gathering = true
			c.mu.Unlock()
			c.yield()
			c.mu.Lock()
			c.gathering = false
			if len(c.queue) > 0 {
				self := ownedCall(id, body, dst, deadline)
				c.traced(ctx, self)
				batch = c.take(self, c.maxBatch)
			}
		}
		c.mu.Unlock()
		if batch == nil {
			status, out, err := c.t.roundTrip(ctx, deadline, body, dst)
			c.release()
			return status, out, err
		}
		self := batch[0]
		c.exchange(batch, self)
		c.release()
		return self.result()
	}
	var j *joined
	if owned {
		j = ownedCall(id, body, dst, deadline)
	} else {
		j = &joined{id: id, body: append([]byte(nil), body...), deadline: deadline, done: make(chan struct{}, 1)}
	}
	c.traced(ctx, j)
	c.queue = append(c.queue, j)
	c.mu.Unlock()
	if owned {
		<-j.done
		return j.result()
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-j.done:
	case <-ctx.Done():
		if j.state.CompareAndSwap(joinWaiting, joinAbandoned) {
			return 0, dst, ctx.Err()
		}
		<-j.done
	case <-timer.C:
		if j.state.CompareAndSwap(joinWaiting, joinAbandoned) {
			return 0, dst, errAttemptTimeout
		}
		<-j.done
	}
	if j.err != nil {
		return 0, dst, j.err
	}
	return j.status, append(dst, j.out...), nil
}

// take removes up to n calls from the head of the queue, after first when it is not nil,
// and returns them as a batch; c.mu is held.
func (c *coalescer) take(first *joined, n int) []*joined {
	k := 0
	if first != nil {
		k = 1
	}
	n = min(len(c.queue), n-k)
	if n+k <= 0 {
		return nil
	}
	batch := make([]*joined, k+n)
	if first != nil {
		batch[0] = first
	}
	copy(batch[k:], c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch
}

// release ends an exchange: the slot goes to the queued calls, if any, as one batch sent from
// a goroutine of its own; otherwise it is freed.
func (c *coalescer) release() {
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.inFlight--
		c.mu.Unlock()
		return
	}
	batch := c.take(nil, c.maxBatch)
	c.mu.Unlock()
	c.wg.Add(1)
	go c.send(batch)
}

// send makes the exchange of the queued calls batch and releases the slot it holds.
func (c *coalescer) send(batch []*joined) {
	defer c.wg.Done()
	defer c.release()
	c.exchange(batch, nil)
}

// exchange sends the calls of batch that are still awaited as one exchange (alone when one
// is) and gives each its answer: delivered to its waiting caller, or, for self (the leading
// caller's own call, not queued), just filled in.
//
// The exchange's deadline is the earliest of its owned calls' deadlines (owned calls have no
// timer of their own), or with none, the latest of the others'. An owned call whose deadline
// passed while it was queued is not sent: it times out. It cannot have waited much beyond
// its deadline, since it queued behind exchanges that started before it, each bounded by an
// attempt timeout its own is not shorter than.
func (c *coalescer) exchange(batch []*joined, self *joined) {
	live := batch[:0]
	var (
		now           = time.Now()
		owned, others time.Time // the earliest deadline of the owned calls, the latest of the others
	)
	for _, j := range batch {
		switch {
		case j != self && j.state.Load() != joinWaiting:
			// Abandoned by its caller.
		case j.owned && !j.deadline.After(now):
			j.err = errAttemptTimeout
			if j != self {
				j.deliver()
			}
		case j.owned:
			live = append(live, j)
			if owned.IsZero() || j.deadline.Before(owned) {
				owned = j.deadline
			}
		default:
			live = append(live, j)
			if j.deadline.After(others) {
				others = j.deadline
			}
		}
	}
	deadline := owned
	if deadline.IsZero() {
		deadline = others
	}
	deliverAll := func() {
		for _, j := range live {
			if j != self {
				j.deliver()
			}
		}
	}
	switch len(live) {
	case 0:
		return
	case 1:
		// Nothing to share the exchange with: the call goes as it came.
		j := live[0]
		j.status, j.out, j.err = c.t.roundTrip(traceContext(live), deadline, j.body, j.dst)
		deliverAll()
		return
	}
	size := 2
	for _, j := range live {
		size += len(j.body) + 1
	}
	body := make([]byte, 0, size)
	body = append(body, '[')
	for i, j := range live {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, j.body...)
	}
	body = append(body, ']')
	if c.batches != nil {
		c.batches(len(live))
	}

	buf := getBuffer()
	defer putBuffer(buf)
	status, out, err := c.t.roundTrip(traceContext(live), deadline, body, (*buf)[:0])
	*buf = out
	switch {
	case err != nil:
		for _, j := range live {
			j.err = err
		}
	case status == 429 || status >= 500:
		// Overload: each call fails over as it would have alone.
		answerEach(live, status, out)
	case status/100 != 2:
		c.refused(status, live)
	default:
		var inline [32]jsonrpc.Reply
		r, elems, ok := jsonrpc.ScanReply(out, inline[:0])
		switch {
		case !ok:
			// A broken answer: each call fails over as it would have alone.
			answerEach(live, status, out)
		case r.IsArray():
			splitBatch(elems, live)
		default:
			c.refused(status, live)
		}
	}
	deliverAll()
}

// answerEach gives every call of live the whole answer body, with its status.
func answerEach(live []*joined, status int, body []byte) {
	for _, j := range live {
		j.status, j.out = status, append(j.dst, body...)
	}
}

// refused ends the calls of live whose batch the node refused (a client error, or a valid
// answer that is no batch answer): they fail over, and the node takes no batch from now on.
func (c *coalescer) refused(status int, live []*joined) {
	if c.off.CompareAndSwap(false, true) {
		c.log.Warn("upstream node refused a JSON-RPC batch; its calls go one by one from now on",
			zap.Int("status", status), zap.Int("calls", len(live)))
	}
	for _, j := range live {
		j.err = errBatchRefused
	}
}

// deliver hands j's answer to its caller unless the caller has gone.
func (j *joined) deliver() {
	if j.state.CompareAndSwap(joinWaiting, joinDelivered) {
		j.done <- struct{}{}
	}
}

// splitBatch gives each call of live its element of a batch answer, matched by id, with
// status 200; a call the answer lacks gets an empty body.
func splitBatch(elems []jsonrpc.Reply, live []*joined) {
	for _, j := range live {
		j.status, j.out = 200, nil
	}
	next := 0 // nodes answer in order: the call after the last one matched comes first
	for e := range elems {
		el := &elems[e]
		v, ok := replyID(el)
		if !ok {
			continue
		}
		for k := range live {
			j := live[(next+k)%len(live)]
			if j.id == v && j.out == nil {
				j.out = append(j.dst, el.Raw...)
				next = (next+k)%len(live) + 1
				break
			}
		}
	}
}

// traced records the span context of ctx in j, when requests carry traceparents.
func (c *coalescer) traced(ctx context.Context, j *joined) {
	if c.t.propagate {
		j.sc = trace.SpanContextFromContext(ctx)
	}
}

// traceContext is the context of a batch's exchange: none (it is no caller's), with the
// span context of its first traced call, so that the exchange carries that call's
// traceparent.
func traceContext(live []*joined) context.Context {
	for _, j := range live {
		if j.sc.IsValid() {
			return trace.ContextWithSpanContext(context.Background(), j.sc)
		}
	}
	return context.Background()
}
