// A socket's queue of outbound messages: answers, notifications, and the close of a slow consumer.

package proxy

import (
	"github.com/fasthttp/websocket"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// outMsg is one queued message: an answer (body), or a notification (prefix, then body, then
// notificationEnd).
type outMsg struct {
	prefix []byte  // the subscription's prefix; nil for an answer
	body   []byte  // shared with other sockets for a notification: never modified
	buf    *[]byte // body's buffer of getBuf, given back once written; nil: not the socket's
	// charged is the bytes taken from socketSet.budget for an answer, given back once it is
	// written or dropped; 0 for a notification or a refusal.
	charged int
}

var notificationEnd = []byte("}}")

// queued is what messages count against a socket's byte bounds: their payloads' bytes (the
// socket's maxQueuedBytes), and the part of those charged to all sockets' budget.
type queued struct{ bytes, charged int }

// sizeOf is what msgs count against the byte bounds.
func sizeOf(msgs []outMsg) queued {
	var q queued
	for i := range msgs {
		q.bytes += msgs[i].payloadLen()
		q.charged += msgs[i].charged
	}
	return q
}

// addQueued counts n bytes more queued for the socket.
func (k *socket) addQueued(n int) {
	b := k.queuedBytes.Add(int64(n))
	k.ss.queuedBytes.Add(int64(n))
	for p := k.ss.peakQueued.Load(); b > p && !k.ss.peakQueued.CompareAndSwap(p, b); p = k.ss.peakQueued.Load() {
	}
}

// unqueue counts out messages written or dropped (q: their sizeOf).
func (k *socket) unqueue(q queued) {
	if q.bytes != 0 {
		k.queuedBytes.Add(-int64(q.bytes))
		k.ss.queuedBytes.Add(-int64(q.bytes))
	}
	k.ss.budget.give(q.charged)
}

// queueAnswer queues the answer out (nil: none) to the message of ex (nil: a message refused
// before it was parsed), then the notifications held by the subscriptions ex made. refusal
// says that out is an error answer already (small: queueSize bounds those, not the bytes).
// An answer that would take the socket's queue over maxQueuedBytes, or the answers of all
// sockets over maxQueuedBytesTotal, is dropped at once and the call answered -32005 instead
// (errQueueFull, errQueuesBusy); the subscriptions it made end, since their ids were in it.
func (k *socket) queueAnswer(ex *Exchange, out *[]byte, refusal bool) {
	k.mu.Lock()
	if k.state != sockOpen {
		k.mu.Unlock()
		if out != nil {
			k.srv.putBuf(out)
		}
		return
	}
	var ended []*subscription
	if out != nil {
		if k.queued >= k.ss.cfg.QueueSize {
			k.overflowLocked(closeSlowConsumer)
			k.srv.putBuf(out)
			return
		}
		charged := 0
		if ex != nil && ex.queueRefused != nil {
			refusal = true
			if ex.queueRefused == k.ss.errQueueFull {
				k.srv.metrics.wsQueueFull.Inc()
			} else {
				k.srv.metrics.wsQueuesBusy.Inc()
			}
		}
		if !refusal {
			var e *jsonrpc.Error
			n := len(*out)
			switch {
			case k.queuedBytes.Load()+int64(n) > int64(k.ss.cfg.MaxQueuedBytes):
				e = k.ss.errQueueFull
				k.srv.metrics.wsQueueFull.Inc()
			case !k.ss.budget.take(n):
				e = k.ss.errQueuesBusy
				k.srv.metrics.wsQueuesBusy.Inc()
			default:
				charged = n
			}
			if e != nil {
				k.srv.putBuf(out) // not pooled when large: the garbage collector takes it
				out = k.srv.getBuf()
				*out = jsonrpc.AppendResponse((*out)[:0], answerID(ex), nil, e)
				ended = k.endPendingLocked(ex)
			}
		}
		k.queue = append(k.ss.queues.grow(k.queue, 1), outMsg{body: *out, buf: out, charged: charged})
		k.queued++
		k.addQueued(len(*out))
	}
	if ex != nil {
		kept := k.pending[:0]
		for _, s := range k.pending {
			if s.ex != ex {
				kept = append(kept, s)
				continue
			}
			k.queue = append(k.ss.queues.grow(k.queue, len(s.held)), s.held...)
			s.held, s.ex = nil, nil
		}
		clear(k.pending[len(kept):])
		k.pending = kept
	}
	if len(k.queue) > 0 {
		k.startWriterLocked()
	}
	k.mu.Unlock()
	if len(ended) > 0 {
		k.endSubs(ended)
	}
}

// roomFor returns the refusal of an answer whose result is n bytes when the socket's queue,
// or all sockets' budget, has no room for it now (its answer is a little longer), so that
// the answer is not built; nil when it has room.
func (k *socket) roomFor(n int) *jsonrpc.Error {
	switch {
	case k.queuedBytes.Load()+int64(n) > int64(k.ss.cfg.MaxQueuedBytes):
		return k.ss.errQueueFull
	case k.ss.budget.used.Load()+int64(n) > k.ss.budget.limit:
		return k.ss.errQueuesBusy
	}
	return nil
}

// answerID is the id of ex's answer: its call's for a single call, none (null) for a batch
// or a message not parsed.
func answerID(ex *Exchange) []byte {
	if ex == nil || ex.msg.Batch || len(ex.msg.Requests) != 1 {
		return nil
	}
	return ex.msg.Requests[0].ID
}

// endPendingLocked ends the pending subscriptions made by ex, with k.mu held, and returns
// them for endSubs.
func (k *socket) endPendingLocked(ex *Exchange) []*subscription {
	var ended []*subscription
	kept := k.pending[:0]
	for _, s := range k.pending {
		if s.ex != ex {
			kept = append(kept, s)
			continue
		}
		delete(k.subs, s.id)
		s.ended = true
		k.queued -= len(s.held)
		k.unqueue(sizeOf(s.held))
		s.held, s.ex = nil, nil
		ended = append(ended, s)
	}
	clear(k.pending[len(kept):])
	k.pending = kept
	return ended
}

// overflowLocked closes a socket whose queue is full (a slow consumer; reason says which
// bound): what is queued is dropped, and the close frame follows what the writer is
// writing. It releases k.mu. Its subscriptions end on another goroutine: notify runs in a
// feed's delivery, which their ends call into.
func (k *socket) overflowLocked(reason string) {
	subs, ok := k.closeLocked(websocket.ClosePolicyViolation, reason, true)
	k.mu.Unlock()
	if !ok {
		return
	}
	k.closed(websocket.ClosePolicyViolation, reason, dropSlowConsumer)
	if len(subs) > 0 {
		k.ss.wg.Add(1)
		go func() {
			defer k.ss.wg.Done()
			k.endSubs(subs)
		}()
	}
}

// dropQueueLocked drops what is queued, with k.mu held; the writer abandons what it took.
func (k *socket) dropQueueLocked() {
	k.unqueue(sizeOf(k.queue))
	for i := range k.queue {
		if b := k.queue[i].buf; b != nil {
			k.srv.putBuf(b)
		}
	}
	k.queued -= len(k.queue)
	clear(k.queue)
	k.queue = k.queue[:0]
	k.dropping.Store(true)
}

// release gives back the buffers of messages that will not be written.
func (k *socket) release(msgs []outMsg) {
	for i := range msgs {
		if b := msgs[i].buf; b != nil {
			k.srv.putBuf(b)
		}
	}
}
