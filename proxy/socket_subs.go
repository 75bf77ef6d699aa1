// A socket's subscriptions: their bookkeeping, their notifications and their ends.

package proxy

import (
	"fmt"
	"time"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// notify queues the notifications of s with results, in order (see Subscription.Notify and
// NotifyAll). Over the queue's limits (queueSize, maxQueuedBytes), the socket is closed (a
// slow consumer) and none of them is queued: the close drops what is queued anyway.
func (k *socket) notify(s *subscription, results ...[]byte) {
	k.mu.Lock()
	if s.ended || k.state != sockOpen {
		k.mu.Unlock()
		return
	}
	if k.queued+len(results) > k.ss.cfg.QueueSize {
		k.overflowLocked(closeSlowConsumer)
		return
	}
	n := 0
	for _, r := range results {
		n += len(s.prefix) + len(r) + len(notificationEnd)
	}
	if k.queuedBytes.Load()+int64(n) > int64(k.ss.cfg.MaxQueuedBytes) {
		k.overflowLocked(closeSlowBytes)
		return
	}
	k.queued += len(results)
	k.addQueued(n)
	if s.ex != nil {
		for _, r := range results {
			s.held = append(s.held, outMsg{prefix: s.prefix, body: r})
		}
		k.mu.Unlock()
		return
	}
	q := k.ss.queues.grow(k.queue, len(results))
	for _, r := range results {
		q = append(q, outMsg{prefix: s.prefix, body: r})
	}
	k.queue = q
	k.startWriterLocked()
	k.mu.Unlock()
}

// takeSubsLocked ends every subscription of the socket, with k.mu held, and returns them
// for endSubs.
func (k *socket) takeSubsLocked() []*subscription {
	if len(k.subs) == 0 {
		return nil
	}
	subs := make([]*subscription, 0, len(k.subs))
	for _, s := range k.subs {
		s.ended = true
		k.queued -= len(s.held)
		k.unqueue(sizeOf(s.held))
		s.held = nil
		subs = append(subs, s)
	}
	k.subs, k.pending = nil, nil
	return subs
}

// endSubs runs the stop funcs of subscriptions that ended, without k.mu.
func (k *socket) endSubs(subs []*subscription) {
	for _, s := range subs {
		k.srv.metrics.wsSubs[s.kind].Dec()
		if s.stop != nil {
			s.stop()
		}
	}
}

// Subscribe implements Socket.
func (k *socket) Subscribe(c *Call, kind string) (Subscription, error) {
	id := jsonrpc.NewID()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state != sockOpen || k.draining {
		return nil, errSocketClosing
	}
	if len(k.subs) >= k.ss.cfg.MaxSubscriptionsPerConn {
		return nil, k.ss.errTooManySubs
	}
	s := &subscription{k: k, id: id, kind: kindIndex(kind), ex: c.Exchange}
	s.prefix = fmt.Appendf(make([]byte, 0, 96+len(id)), `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"%s","result":`, id)
	if k.subs == nil {
		k.subs = map[string]*subscription{}
	}
	k.subs[id] = s
	k.pending = append(k.pending, s)
	k.srv.metrics.wsSubs[s.kind].Inc()
	return s, nil
}

// Unsubscribe implements Socket.
func (k *socket) Unsubscribe(id string) bool {
	k.mu.Lock()
	s := k.subs[id]
	if s == nil {
		k.mu.Unlock()
		return false
	}
	delete(k.subs, id)
	s.ended = true
	k.queued -= len(s.held)
	k.unqueue(sizeOf(s.held))
	s.held = nil
	for i, p := range k.pending {
		if p == s {
			k.pending = append(k.pending[:i], k.pending[i+1:]...)
			break
		}
	}
	if len(k.subs) == 0 && k.timer != nil && k.state == sockOpen {
		k.timer.Reset(k.nextTick(time.Now(), true)) // idle now: the idle timeout runs
	}
	k.mu.Unlock()
	k.endSubs([]*subscription{s})
	return true
}

var errSocketClosing = &jsonrpc.Error{Code: -32000, Message: "the connection is closing: open a new one"}

// subscription is one subscription of a socket (Subscription). Its fields after prefix are
// guarded by its socket's mu.
type subscription struct {
	k      *socket
	id     string
	kind   int
	prefix []byte // {"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":ID,"result":

	ex    *Exchange // pending: the exchange whose answer goes first; nil once active
	held  []outMsg  // the notifications while pending
	stop  func()
	ended bool
}

var _ Subscription = (*subscription)(nil)

func (s *subscription) ID() string { return s.id }

func (s *subscription) Notify(result []byte) { s.k.notify(s, result) }

func (s *subscription) NotifyAll(results [][]byte) {
	if len(results) > 0 {
		s.k.notify(s, results...)
	}
}

func (s *subscription) OnEnd(stop func()) {
	s.k.mu.Lock()
	if !s.ended {
		s.stop = stop
		s.k.mu.Unlock()
		return
	}
	s.k.mu.Unlock()
	stop()
}

// subscriptionKinds are the label values of web3gate_websocket_subscriptions.
var subscriptionKinds = []string{"newHeads", "logs", "syncing", "other"}

func kindIndex(kind string) int {
	for i, k := range subscriptionKinds[:len(subscriptionKinds)-1] {
		if k == kind {
			return i
		}
	}
	return len(subscriptionKinds) - 1
}
