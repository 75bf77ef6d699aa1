package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// clientStates remembers, per OAuth client, whether it may use the tokens it holds, as read
// from the store at most interval ago. The store is shared by the replicas, so `web3gate
// clients disable` on any of them (or on the store file) reaches every verifier within
// interval, plus the time of one store read.
//
// A check of a client whose state is fresh reads two atomics. The first check after interval
// reads the store; other checks of the same client meanwhile wait for that read. When the
// read fails, the last state read stays in force (a warning is logged) and the store is asked
// again at most once a second; a client never read yet is refused until a read succeeds.
type clientStates struct {
	clients  ClientStore
	interval time.Duration
	log      *zap.Logger

	mu sync.RWMutex
	m  map[string]*clientState
}

type clientState struct {
	refresh sync.Mutex // held by the check reading the store
	cur     atomic.Pointer[stateSnapshot]
}

type stateSnapshot struct {
	checked  time.Time // when the state was read; zero: never
	retryAt  time.Time // a failed read is not retried before then
	disabled bool      // disabled, or no longer stored
}

var (
	errClientDisabled   = errors.New("the client is disabled")
	errClientStateUnset = errors.New("the client's state could not be read")
)

// maxClientStates bounds the clients remembered. Only ids of verified tokens (signed by
// web3gate's key) get in, so it is reached only by a store with that many clients in use;
// a full table drops the states older than interval, or else all of them.
const maxClientStates = 1 << 16

// stateReadTimeout bounds one read of a client's state.
const stateReadTimeout = 5 * time.Second

func newClientStates(clients ClientStore, interval time.Duration, log *zap.Logger) *clientStates {
	return &clientStates{clients: clients, interval: interval, log: log, m: map[string]*clientState{}}
}

// check returns nil when the client with id may use its tokens, errClientDisabled when it is
// disabled or gone, errClientStateUnset when its state has never been read.
func (s *clientStates) check(id string, now time.Time) error {
	st := s.state(id, now)
	if snap := st.cur.Load(); snap != nil && now.Sub(snap.checked) < s.interval {
		return snap.err()
	}
	st.refresh.Lock()
	defer st.refresh.Unlock()
	snap := st.cur.Load()
	if snap != nil && (now.Sub(snap.checked) < s.interval || now.Before(snap.retryAt)) {
		return snap.err() // read by the check this one waited for, or failed just now
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateReadTimeout)
	defer cancel()
	c, err := s.clients.Client(ctx, id)
	next := &stateSnapshot{}
	switch {
	case err == nil:
		next.checked, next.disabled = now, c.DisabledAt != nil
	case errors.Is(err, store.ErrNotFound):
		next.checked, next.disabled = now, true
	default:
		if snap != nil {
			*next = *snap
		}
		next.retryAt = now.Add(min(time.Second, s.interval))
		s.log.Warn("oauth: the client's state could not be read; its last known state stays in force",
			zap.String("client_id", id), zap.Bool("known", !next.checked.IsZero()), zap.Error(err))
	}
	if snap != nil && !snap.checked.IsZero() && !next.checked.IsZero() && snap.disabled != next.disabled {
		s.log.Info("oauth: a client's state changed", zap.String("client_id", id), zap.Bool("disabled", next.disabled))
	}
	st.cur.Store(next)
	return next.err()
}

func (p *stateSnapshot) err() error {
	switch {
	case p.checked.IsZero():
		return errClientStateUnset
	case p.disabled:
		return errClientDisabled
	}
	return nil
}

// state is id's entry, made when missing.
func (s *clientStates) state(id string, now time.Time) *clientState {
	s.mu.RLock()
	st, ok := s.m[id]
	s.mu.RUnlock()
	if ok {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[id]; ok {
		return st
	}
	if len(s.m) >= maxClientStates {
		for k, old := range s.m {
			if p := old.cur.Load(); p == nil || now.Sub(p.checked) >= s.interval {
				delete(s.m, k)
			}
		}
		if len(s.m) >= maxClientStates {
			clear(s.m)
		}
	}
	st = &clientState{}
	s.m[id] = st
	return st
}
