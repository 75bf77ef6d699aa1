package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// Leases as rows of the store (migration 0012), for SQLite and any store without advisory
// locks. With ttl = leaseTimeout - leaseCheckInterval:
//
//   - a standby asks every leaseCheckInterval, and takes a lease whose expiry has passed
//     (or that was released), writing itself as holder, the next epoch and now + ttl;
//   - the holder renews every min(leaseCheckInterval, ttl/3), each renewal moving the expiry
//     to its own start + ttl;
//   - a holder whose last successful renewal started ttl*2/3 ago cancels its job, whatever
//     its renewals are doing (a write stuck behind others, a full disk): the job has the
//     last third of the ttl to stop before anyone else may start it;
//   - a renewal that finds the row taken over (another holder or epoch) cancels at once.
//
// A holder that dies is replaced within ttl + leaseCheckInterval = leaseTimeout, except by a
// later process of the same replica (the same cluster.replicaId), which takes the lease of its
// crashed predecessor at once: a single process restarted after a crash runs its jobs at
// start, as it did before leases (had the predecessor survived, its next renewal finds the
// row taken over and cancels its job). Every
// process compares times of its own clock with the row's, which is sound on SQLite (every
// process of one file runs on one host); stores shared across hosts use advisory locks.

// NewTable returns Leases kept as rows of db.
func NewTable(db *store.DB, cfg Config, deps Deps) (*Leases, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lease: cluster: %w", err)
	}
	b := &table{db: db, replica: cfg.ReplicaID, holder: cfg.ReplicaID + "/" + instanceTag(), t: cfg.timings()}
	return newLeases(cfg, b, deps), nil
}

type table struct {
	db     *store.DB
	holder string
	// replica is the replica id: a lease held by another process of the same replica (an
	// earlier one, which crashed holding it) is taken over at once, not after its expiry.
	replica string
	t       timings

	// stalled, set by tests, keeps the holder's writes of a lease (acquisition, renewals,
	// release) from happening while it reports true (a holder that hangs or cannot write).
	stalled func(name string) bool
}

func (b *table) close() error { return nil }

func (b *table) acquire(ctx context.Context, name string, log *zap.Logger) (*grant, error) {
	standing, failing := false, false
	for {
		start := time.Now()
		var (
			l  *store.Lease
			ok bool
		)
		err := b.write(ctx, b.t.check, func(wctx context.Context, tx *store.DBTx) error {
			if b.stalled != nil && b.stalled(name) {
				return errors.New("stalled by a test")
			}
			var err error
			l, ok, err = tx.AcquireLeaseFrom(wctx, name, b.holder, b.replica+"/", start, start.Add(b.t.ttl))
			return err
		})
		switch {
		case ctx.Err() != nil:
			if err == nil && ok {
				// Taken as ctx ended: give it back at once.
				_ = b.release(name, l.Epoch)
			}
			return nil, ctx.Err()
		case err != nil:
			if !failing {
				log.Warn("lease: asking for the lease failed; retrying", zap.Error(err))
				failing = true
			}
		case ok:
			g := newGrant(l.Epoch, 0)
			stop := make(chan struct{})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				b.renew(name, l.Epoch, start, g, stop, log)
			}()
			g.release = func() error {
				close(stop)
				<-stopped // no renewal after the release
				return b.release(name, l.Epoch)
			}
			return g, nil
		case !standing:
			log.Info("lease held elsewhere: standing by", zap.String("holder", l.Holder), zap.Int64("epoch", l.Epoch),
				zap.Time("expires", l.ExpiresAt))
			standing = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(b.t.check):
		}
	}
}

type renewal struct {
	start time.Time
	err   error
}

// renew keeps the lease name at epoch, taken with a write that started at from, until stop
// is closed or the lease is lost (g.lose).
func (b *table) renew(name string, epoch int64, from time.Time, g *grant, stop <-chan struct{}, log *zap.Logger) {
	deadline := from.Add(b.t.giveUp)
	giveUp := time.NewTimer(time.Until(deadline))
	defer giveUp.Stop()
	tick := time.NewTicker(b.t.renew)
	defer tick.Stop()
	results := make(chan renewal, 1)
	inFlight := false
	defer func() {
		if inFlight {
			<-results // bounded by the renewal's deadline
		}
	}()
	failing := false
	for {
		select {
		case <-stop:
			return
		case <-giveUp.C:
			g.lose(fmt.Errorf("not renewed within %s of the last renewal (the lease expires %s after it)", b.t.giveUp, b.t.ttl))
			return
		case <-tick.C:
			if inFlight || b.stalled != nil && b.stalled(name) {
				continue
			}
			inFlight = true
			start, dl := time.Now(), deadline
			go func() {
				err := b.write(context.Background(), time.Until(dl), func(wctx context.Context, tx *store.DBTx) error {
					return tx.RenewLease(wctx, name, b.holder, epoch, start, start.Add(b.t.ttl))
				})
				results <- renewal{start, err}
			}()
		case r := <-results:
			inFlight = false
			switch {
			case r.err == nil:
				if failing {
					log.Info("lease renewed again")
					failing = false
				}
				deadline = r.start.Add(b.t.giveUp)
				giveUp.Reset(time.Until(deadline)) // fires at once when the renewal took that long
			case errors.Is(r.err, store.ErrNotFound):
				g.lose(errors.New("the lease row was taken over"))
				return
			case !failing:
				log.Warn("lease renewal failed; retrying until the lease must be given up", zap.Error(r.err),
					zap.Time("give_up_at", deadline))
				failing = true
			}
		}
	}
}

// release ends this holder's hold at epoch; a lease taken over meanwhile is not an error.
func (b *table) release(name string, epoch int64) error {
	if b.stalled != nil && b.stalled(name) {
		return errors.New("stalled by a test")
	}
	err := b.write(context.Background(), b.t.check, func(wctx context.Context, tx *store.DBTx) error {
		return tx.ReleaseLease(wctx, name, b.holder, epoch, time.Now())
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// write runs fn in a write transaction bounded by timeout.
func (b *table) write(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, tx *store.DBTx) error) error {
	if timeout <= 0 {
		return context.DeadlineExceeded
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return b.db.Write(wctx, func(tx *store.DBTx) error { return fn(wctx, tx) })
}
