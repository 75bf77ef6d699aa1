package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

// Group commit. A durable SQLite commit (synchronous=FULL) costs an fsync, which bounds one
// writer to a few thousand commits a second whatever the work in them. WriteGrouped lets
// callers that each need a small durable write share commits: a committer goroutine takes
// every function queued while the previous commit was being made and runs them in one
// transaction, each inside its own savepoint, so one function's failure undoes only its own
// work. Each caller learns its own outcome once the shared transaction has committed.
//
// PostgreSQL does not group WriteGrouped: each call is a transaction of its own. Concurrent
// writers are what PostgreSQL is built for, and its WAL flush already serves every commit
// waiting for it at once (its own group commit), so grouping would save round trips but not
// fsyncs. It would cost more than that: a group runs its functions one after the other,
// holding every lock each took (a nonce reservation's account lock, its rows) until the
// group commits, and two groups of two replicas that lock two accounts in opposite orders
// deadlock, which PostgreSQL resolves by aborting one whole group (after deadlock_timeout,
// a second during which both wait). The same holds for WriteGroupedLater's writes (a
// transaction's broadcast mark): a group of them updating rows in arrival order and the
// confirmer's transaction marking a block's rows mined in block order lock the same rows in
// two orders. So on PostgreSQL each deferred write is one statement committing on its own,
// run by one of laterWorkers goroutines (WriteOne's round trip). Nonce reservations are
// grouped per account by the wallet itself, under the account's lock only.

// maxGroup bounds how many functions share one commit.
const maxGroup = 512

type groupOp struct {
	ctx   context.Context
	fn    func(dbtx *DBTx) error
	done  chan error // buffered: the committer never blocks on it
	later bool       // nobody waits: log a failure
}

type grouper struct {
	stop    sync.Once
	ops     chan groupOp // buffered: queueing does not wait for a commit in progress
	quit    chan struct{}
	stopped chan struct{} // closed when the committer has ended
	wg      sync.WaitGroup
}

var errClosed = errors.New("store: closed")

// WriteGrouped runs fn in a write transaction that it may share with other WriteGrouped
// calls, inside a savepoint of its own: fn's writes are committed if fn returns nil and the
// shared transaction commits, and undone if fn returns an error (which WriteGrouped returns).
// When the shared commit fails, every function in it gets that error.
//
// ctx bounds the wait for a place in a group; a function that has started is always waited
// for, so that the caller never leaves while its write may still commit. fn must not keep
// state outside the transaction that a failed commit would leave wrong.
func (db *DB) WriteGrouped(ctx context.Context, fn func(dbtx *DBTx) error) error {
	g := &db.group
	if !db.d.groupCommit {
		return db.writeAlone(ctx, fn)
	}
	op := groupOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case g.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.quit:
		return errClosed
	}
	select {
	case err := <-op.done:
		return err
	case <-g.stopped:
		// The committer has answered every op it took; one queued too late gets none.
		select {
		case err := <-op.done:
			return err
		default:
			return errClosed
		}
	}
}

// WriteGroupedLater queues fn like WriteGrouped and returns without waiting for the commit:
// for writes whose loss in a crash is harmless (they are redone from other state). A
// failure is logged. After Close the write is dropped. On PostgreSQL fn makes one statement,
// which commits on its own (see above).
func (db *DB) WriteGroupedLater(fn func(dbtx *DBTx) error) {
	g := &db.group
	op := groupOp{ctx: context.Background(), fn: fn, done: make(chan error, 1), later: true}
	select {
	case g.ops <- op:
	case <-g.quit:
	}
}

// writeAlone is WriteGrouped without a group: fn in a write transaction of its own, waited
// for even when ctx ends once it started (fn's own statements still see ctx).
func (db *DB) writeAlone(ctx context.Context, fn func(dbtx *DBTx) error) (err error) {
	select {
	case <-db.group.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	return db.Write(context.WithoutCancel(ctx), func(dbtx *DBTx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("store: grouped write panicked: %v", r)
			}
		}()
		return fn(dbtx)
	})
}

// laterWorkers run the deferred writes on PostgreSQL, each on its own.
const laterWorkers = 4

// laterLoop runs deferred writes one statement at a time (PostgreSQL), until Close.
func (db *DB) laterLoop() {
	g := &db.group
	defer g.wg.Done()
	for {
		select {
		case op := <-g.ops:
			err := db.runOne(context.Background(), func(dbtx *DBTx) (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("store: deferred write panicked: %v", r)
					}
				}()
				return op.fn(dbtx)
			})
			if err != nil {
				db.log.Warn("store: a deferred write failed", zap.Error(err))
			}
			op.done <- err
		case <-g.quit:
			return
		}
	}
}

func (db *DB) commitLoop() {
	g := &db.group
	defer g.wg.Done()
	defer close(g.stopped)
	batch := make([]groupOp, 0, maxGroup)
	errs := make([]error, 0, maxGroup)
	for {
		select {
		case op := <-g.ops:
			batch = append(batch[:0], op)
		case <-g.quit:
			return
		}
	collect:
		for len(batch) < maxGroup {
			select {
			case op := <-g.ops:
				batch = append(batch, op)
			default:
				break collect
			}
		}
		errs = errs[:0]
		for range batch {
			errs = append(errs, nil)
		}
		// The transaction itself runs without a deadline: the functions in it were accepted,
		// and their callers wait for the outcome.
		err := db.Write(context.Background(), func(dbtx *DBTx) error {
			for i, op := range batch {
				if err := op.ctx.Err(); err != nil {
					errs[i] = err
					continue
				}
				errs[i] = savepoint(dbtx, op)
			}
			return nil
		})
		for i, op := range batch {
			e := errs[i]
			if err != nil {
				e = fmt.Errorf("group commit: %w", err)
			}
			if op.later && e != nil {
				db.log.Warn("store: a deferred write failed", zap.Error(e))
			}
			op.done <- e
		}
	}
}

// savepoint runs op.fn inside a savepoint of dbtx and undoes it when fn fails or panics.
func savepoint(dbtx *DBTx, op groupOp) (err error) {
	ctx := context.Background()
	if _, err := dbtx.ExecContext(ctx, qSavepoint); err != nil {
		return err
	}
	ok := false
	defer func() {
		if ok {
			return
		}
		if r := recover(); r != nil {
			err = fmt.Errorf("store: grouped write panicked: %v", r)
		}
		if _, rerr := dbtx.ExecContext(ctx, qRollbackTo); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if _, rerr := dbtx.ExecContext(ctx, qRelease); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if err := op.fn(dbtx); err != nil {
		return err
	}
	if _, err := dbtx.ExecContext(ctx, qRelease); err != nil {
		return err
	}
	ok = true
	return nil
}

var (
	qSavepoint  = prepared("SAVEPOINT grouped")
	qRollbackTo = prepared("ROLLBACK TO grouped")
	qRelease    = prepared("RELEASE grouped")
)
