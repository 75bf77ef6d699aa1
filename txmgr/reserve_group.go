package txmgr

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"time"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// Reservations grouped per account (PostgreSQL). A reservation reads the account's nonce
// state and writes on it under the account's lock (store.DBTx.LockAccount), and on PostgreSQL
// that lock is held until the reservation's transaction has committed: its statements' round
// trips and a durable commit (a WAL flush) per reservation, one reservation of the account
// at a time across every replica. That bounds one account's sends to a few hundred a second
// whatever the machine.
//
// So each process reserves the nonces of one account in groups: the reservations that arrive
// while a group is being committed wait in the account's queue, and one goroutine per busy
// account takes them all (up to maxReserveGroup) into the next group: one transaction that
// takes the lock once, reads the nonce head, the released slots and the in-flight count and
// cost in one statement, decides each reservation in arrival order exactly as reserve does
// alone (the client's nonce, the in-flight cap and the funds against what the group reserved
// before it), records the accepted ones in one statement, moves the head once and commits
// once: six round trips and one WAL flush for the group, whatever its size. A reservation refused in
// the group (a wrong client nonce, the cap, funds, an Idempotency-Key in use) changes nothing
// and gets its own error; the group goes on. A store failure fails the whole group, each of
// its callers getting it.
//
// Groups of different accounts run at once, each holding one account's lock only, so two
// replicas' groups never deadlock (the reason store/group.go gives for not grouping PostgreSQL
// writes). SQLite keeps WriteGrouped's group commit, which already serializes and shares the
// commits of every write.

// maxReserveGroup bounds the reservations of one group.
const maxReserveGroup = 256

// reserveOp is one reservation waiting for its group.
type reserveOp struct {
	r          *txreq.Request
	res        reservation
	rec        *store.TxRecord // filled in: Nonce, ID
	chainNonce uint64          // the chain's pending nonce, read when the head was not known
	readChain  bool
	// deadline bounds the reservation, its wait for a group included (the store's
	// transaction timeout from its arrival); zero: none.
	deadline time.Time
	err      error
	done     chan struct{}
}

// reserveQueue holds the reservations of one account waiting for a group.
type reserveQueue struct {
	mu      sync.Mutex
	ops     []*reserveOp
	running bool // a goroutine is committing groups of this account
}

// reserveInGroup queues the reservation of op and waits for its outcome. ctx bounds the wait
// for a place in a group; once its group has started it is always waited for, so that the
// caller never leaves while its nonce may be committed.
//
// A reservation ends within the store's transaction timeout of its arrival: one not taken
// into a group by then (the account's group before it is held up by a database that does not
// answer) fails with "store unavailable", and a group's transaction ends by the earliest
// deadline of its reservations.
func (t *Manager) reserveInGroup(ctx context.Context, hk headKey, op *reserveOp) error {
	v, _ := t.reserveQueues.LoadOrStore(hk, &reserveQueue{})
	q := v.(*reserveQueue)
	op.done = make(chan struct{})
	var expired <-chan time.Time
	if d := t.db.TransactionTimeout(); d > 0 {
		op.deadline = time.Now().Add(d)
		timer := time.NewTimer(d)
		defer timer.Stop()
		expired = timer.C
	}
	q.mu.Lock()
	q.ops = append(q.ops, op)
	if !q.running {
		q.running = true
		go t.runReservations(hk, q)
	}
	q.mu.Unlock()
	var why error
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		why = ctx.Err()
	case <-expired:
		why = jsonrpc.ErrStoreUnavailable.Withf("store unavailable: the account's reservations before this one did not commit within store.transactionTimeout (%s); nothing was reserved",
			t.db.TransactionTimeout())
	}
	q.mu.Lock()
	for i, o := range q.ops {
		if o == op { // not taken into a group yet: withdrawn
			q.ops = append(q.ops[:i], q.ops[i+1:]...)
			q.mu.Unlock()
			return why
		}
	}
	q.mu.Unlock()
	<-op.done
	return op.err
}

// runReservations commits the groups of one account until its queue is empty.
func (t *Manager) runReservations(hk headKey, q *reserveQueue) {
	for {
		q.mu.Lock()
		n := min(len(q.ops), maxReserveGroup)
		if n == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		group := make([]*reserveOp, n)
		copy(group, q.ops)
		q.ops = append(q.ops[:0], q.ops[n:]...)
		q.mu.Unlock()
		t.reserveGroup(hk, group)
		for _, op := range group {
			close(op.done)
		}
	}
}

// reserveGroup reserves the nonces of group, of one account, in one store transaction; each
// op gets its outcome in op.err.
func (t *Manager) reserveGroup(hk headKey, group []*reserveOp) {
	// The group's transaction is no caller's: it runs to its end whoever leaves, bounded by
	// its earliest reservation's deadline (and the store's transaction timeout).
	ctx := context.Background()
	var first time.Time
	for _, op := range group {
		if !op.deadline.IsZero() && (first.IsZero() || op.deadline.Before(first)) {
			first = op.deadline
		}
	}
	if !first.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, first)
		defer cancel()
	}
	chainID, addr := hk.chainID, hk.addr
	err := t.db.Write(ctx, func(tx *store.DBTx) error {
		for _, op := range group {
			op.err = nil
			op.rec.ID = 0
		}
		if err := tx.LockAccount(ctx, chainID, addr); err != nil {
			return err
		}
		st, err := tx.ReservationState(ctx, chainID, addr)
		if err != nil {
			return err
		}
		next := st.Next
		if !st.HasHead {
			for _, op := range group {
				if op.readChain && op.chainNonce > next {
					next = op.chainNonce
				}
			}
			if maxStored, has, err := tx.MaxStoredNonce(ctx, chainID, addr); err != nil {
				return err
			} else if has && maxStored+1 > next {
				next = maxStored + 1
			}
		}
		n, inflight := st.InFlight, st.Cost
		raise := false
		// Rows are recorded together at the end, in one statement, but for those that may
		// conflict (an Idempotency-Key) and while released slots exist (lowestFree reads the
		// rows recorded before), which are recorded one by one.
		var batch []*store.TxRecord
		for _, op := range group {
			nonce := next
			if st.Released {
				if nonce, err = lowestFree(ctx, tx, chainID, addr, next); err != nil {
					return err
				}
			}
			if op.r.Nonce != nil && *op.r.Nonce != nonce {
				op.err = nonceError(*op.r.Nonce, nonce)
				continue
			}
			if n >= t.cfg.MaxInFlight {
				op.err = errInFlightFull
				continue
			}
			if err := funded(op.res.balance, op.rec.MaxCost, n, inflight); err != nil {
				op.err = err
				continue
			}
			op.rec.Nonce = nonce
			if op.rec.IdempotencyKey != "" || st.Released {
				if err := insertAlone(ctx, tx, op.rec); err != nil {
					if errors.Is(err, store.ErrExists) && op.rec.IdempotencyKey != "" {
						op.err = err // the key is in use: the caller answers with its transaction
						continue
					}
					return err
				}
			} else {
				batch = append(batch, op.rec)
			}
			if nonce == next {
				next++
				raise = true
			}
			n++
			inflight = new(big.Int).Add(inflight, op.rec.MaxCost)
		}
		if err := tx.InsertTxs(ctx, batch); err != nil {
			return err
		}
		if raise {
			return tx.RaiseNextNonce(ctx, chainID, addr, next)
		}
		return nil
	})
	if err != nil {
		for _, op := range group {
			op.err = err
		}
	}
}

// insertAlone records rec; one with an Idempotency-Key, which another transaction may hold
// already, is recorded inside a savepoint, so that its refusal undoes only itself and the
// group's transaction goes on.
func insertAlone(ctx context.Context, tx *store.DBTx, rec *store.TxRecord) error {
	if rec.IdempotencyKey == "" {
		return tx.InsertTx(ctx, rec)
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT reservation"); err != nil {
		return err
	}
	if err := tx.InsertTx(ctx, rec); err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT reservation"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT reservation")
	return err
}
