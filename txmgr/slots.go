package txmgr

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Waiting for a slot: a send that finds its account's in-flight cap (maxInFlight) reached
// waits until one of the account's transactions leaves flight (mined, failed, released), at
// most inFlightWait and never longer than its request, with at most maxQueued sends of one
// account waiting at once. A waiting send wakes the chain's confirmer, which then reads new
// blocks at once rather than at its next tick, and every pass of the confirmer wakes the
// waiting sends of its chain, which try again.

// slotSignal wakes the sends of one chain waiting for a slot.
type slotSignal struct {
	mu   sync.Mutex
	ch   chan struct{} // closed by notify, then replaced
	kick chan struct{} // asks the confirmer for a pass now (capacity 1)
}

func newSlotSignal() *slotSignal {
	return &slotSignal{ch: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// wait is a channel closed at the next notify.
func (s *slotSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// notify wakes every waiter.
func (s *slotSignal) notify() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

// kicked asks the confirmer for a pass, without blocking.
func (s *slotSignal) kicked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// slotRetry is how long a waiting send sleeps without a notify before it looks again.
const slotRetry = 250 * time.Millisecond

var errNoSlot = errors.New("no slot within the wait")

// queue is the count of the sends of hk waiting for a slot.
func (t *Manager) queue(hk headKey) *atomic.Int32 {
	v, _ := t.queued.LoadOrStore(hk, new(atomic.Int32))
	return v.(*atomic.Int32)
}

// awaitSlot waits until the confirmer of chainID made a pass (a slot may have freed), a
// short while passed, ctx ended, or deadline passed (errNoSlot).
func (t *Manager) awaitSlot(ctx context.Context, chainID uint64, deadline time.Time) error {
	left := time.Until(deadline)
	if left <= 0 {
		return errNoSlot
	}
	s := t.slots[chainID]
	if s == nil {
		return errNoSlot
	}
	woken := s.wait()
	s.kicked()
	timer := time.NewTimer(min(left, slotRetry))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woken:
	case <-timer.C:
	}
	return nil
}

// slotsFreed wakes the sends of chainID waiting for a slot.
func (t *Manager) slotsFreed(chainID uint64) {
	if s := t.slots[chainID]; s != nil {
		s.notify()
	}
}
