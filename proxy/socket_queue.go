// A socket's queue of outbound messages: answers, notifications, and the close of a slow consumer.

package proxy

import "github.com/fasthttp/websocket"

// outMsg is one queued message: an answer (body), or a notification (prefix, then body, then
// notificationEnd).
type outMsg struct {
	prefix []byte  // the subscription's prefix; nil for an answer
	body   []byte  // shared with other sockets for a notification: never modified
	buf    *[]byte // body's buffer of getBuf, given back once written; nil: not the socket's
}

var notificationEnd = []byte("}}")

// queueAnswer queues the answer out (nil: none) to the message of ex (nil: a message refused
// before it was parsed), then the notifications held by the subscriptions ex made.
func (k *socket) queueAnswer(ex *Exchange, out *[]byte) {
	k.mu.Lock()
	if k.state != sockOpen {
		k.mu.Unlock()
		if out != nil {
			k.srv.putBuf(out)
		}
		return
	}
	if out != nil {
		if k.queued >= k.ss.cfg.QueueSize {
			k.overflowLocked()
			k.srv.putBuf(out)
			return
		}
		k.queue = append(k.ss.queues.grow(k.queue, 1), outMsg{body: *out, buf: out})
		k.queued++
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
}

// overflowLocked closes a socket whose queue is full (a slow consumer): what is queued is
// dropped, and the close frame follows what the writer is writing. It releases k.mu. Its
// subscriptions end on another goroutine: notify runs in a feed's delivery, which their
// ends call into.
func (k *socket) overflowLocked() {
	subs, ok := k.closeLocked(websocket.ClosePolicyViolation, closeSlowConsumer, true)
	k.mu.Unlock()
	if !ok {
		return
	}
	k.closed(websocket.ClosePolicyViolation, closeSlowConsumer, dropSlowConsumer)
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
