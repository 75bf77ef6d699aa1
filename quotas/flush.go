// The flusher: adds the charges to the store, reads the totals of new rows, prunes old periods.

package quotas

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// Retention: the flusher deletes, about once an hour, the rows of periods that started more
// than retainMonths months before the current month.
const (
	retainMonths  = 13
	pruneInterval = time.Hour
)

// idleAfter is how long a client id with nothing left to flush stays in memory after its last
// charge; its totals are read from the store again when it comes back.
func idleAfter(flush time.Duration) time.Duration { return max(time.Minute, 10*flush) }

// batchRows bounds the rows one store transaction of the flusher writes or reads.
const batchRows = 500

// Start runs the flusher: every flushInterval it adds the charges to the store, and it reads
// the totals of new rows as they appear. With quotas disabled it does nothing.
func (b *Book) Start() {
	if !b.cfg.Enabled {
		return
	}
	b.start.Do(func() {
		b.started = true
		go b.loop()
	})
}

// Close stops the flusher and flushes what is left (bounded by the store's transaction
// timeout); charges after Close are not flushed. It returns the last flush's error.
func (b *Book) Close() error {
	var err error
	b.stop.Do(func() {
		close(b.quit)
		if b.started {
			<-b.done
		}
		if b.cfg.Enabled {
			err = b.flush(context.Background())
		}
	})
	return err
}

func (b *Book) loop() {
	defer close(b.done)
	t := time.NewTicker(b.cfg.FlushInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.quit
		cancel()
	}()
	for {
		select {
		case <-b.quit:
			return
		case <-b.wake:
			if !b.failing { // else the next tick tries, not every new client id
				_ = b.load(ctx)
			}
		case <-t.C:
			_ = b.flush(ctx)
			_ = b.load(ctx)
			b.prune(ctx)
		}
	}
}

// item is one row's part in a flush or a read.
type item struct {
	client string
	r      *row
	delta  uint64
	total  uint64
}

func (it *item) key() store.UsageKey {
	return store.UsageKey{ClientID: it.client, Period: periodNames[it.r.period], Start: it.r.start}
}

// compareItems orders a flush's rows the same on every replica, so that two replicas'
// transactions lock shared rows in one order (PostgreSQL).
func compareItems(a, b item) int {
	if c := strings.Compare(a.client, b.client); c != 0 {
		return c
	}
	if a.r.period != b.r.period {
		return a.r.period - b.r.period
	}
	return a.r.start.Compare(b.r.start)
}

// flush adds every row's pending charges to the store, batchRows rows per transaction, and
// learns their totals; a batch that fails gives its charges back to pending (as do the
// batches after it, not tried). Rows and client ids with nothing left to flush and no recent
// charge are dropped from memory.
func (b *Book) flush(ctx context.Context) error {
	now := b.now().UTC()
	var items []item
	b.mu.Lock()
	for id, c := range b.clients {
		for _, r := range slices.Concat(c.cur[:], c.stale) {
			if r != nil && r.pending > 0 {
				items = append(items, item{client: id, r: r, delta: r.pending})
				r.flushing, r.pending = r.flushing+r.pending, 0
			}
		}
	}
	b.mu.Unlock()
	slices.SortFunc(items, compareItems)

	// A flush is not cancelled once it starts, only bounded by the store's transaction
	// timeout: a COMMIT interrupted by a cancellation may have been applied all the same,
	// and charges given back to pending after an applied flush would be added twice
	// (Close waits for the flush in progress, then flushes what is left).
	ctx = context.WithoutCancel(ctx)
	var err error
	done := 0
	for done < len(items) && err == nil {
		batch := items[done:min(len(items), done+batchRows)]
		err = b.db.Write(ctx, func(tx *store.DBTx) error {
			for i := range batch {
				total, err := tx.AddUsage(ctx, batch[i].key(), batch[i].delta, now)
				if err != nil {
					return err
				}
				batch[i].total = total
			}
			return nil
		})
		if err == nil {
			done += len(batch)
		}
	}

	b.mu.Lock()
	for i := range items {
		it := &items[i]
		it.r.flushing -= it.delta
		if i < done {
			it.r.total, it.r.known = it.total, true
		} else {
			it.r.pending = satAdd(it.r.pending, it.delta)
		}
	}
	var unflushed uint64
	idle := now.Add(-idleAfter(b.cfg.FlushInterval))
	for id, c := range b.clients {
		c.stale = slices.DeleteFunc(c.stale, func(r *row) bool { return r.unflushed() == 0 })
		left := uint64(0)
		for _, r := range slices.Concat(c.cur[:], c.stale) {
			if r != nil {
				left = satAdd(left, r.unflushed())
			}
		}
		if left == 0 && c.charged.Before(idle) {
			delete(b.clients, id)
		}
		unflushed = satAdd(unflushed, left)
	}
	b.mu.Unlock()
	b.unflushed.Set(float64(unflushed))
	if err != nil {
		err = fmt.Errorf("quotas: flush usage: %w", err)
	}
	b.outcome(err, "flush", len(items)-done, unflushed)
	return err
}

// load reads from the store the totals of the current rows not known yet.
func (b *Book) load(ctx context.Context) error {
	var items []item
	b.mu.Lock()
	for id, c := range b.clients {
		for _, r := range c.cur {
			if r != nil && !r.known {
				items = append(items, item{client: id, r: r})
			}
		}
	}
	b.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	var err error
	for done := 0; done < len(items) && err == nil; done += batchRows {
		batch := items[done:min(len(items), done+batchRows)]
		err = b.db.Read(ctx, func(tx *store.DBTx) error {
			for i := range batch {
				total, err := tx.Usage(ctx, batch[i].key())
				if err != nil {
					return err
				}
				batch[i].total = total
			}
			return nil
		})
		if err == nil {
			b.mu.Lock()
			for _, it := range batch {
				// A flush since the read learned a newer total.
				if !it.r.known {
					it.r.total, it.r.known = it.total, true
				}
			}
			b.mu.Unlock()
		}
	}
	if err != nil {
		err = fmt.Errorf("quotas: read usage: %w", err)
	}
	b.outcome(err, "read", 0, 0)
	return err
}

// outcome logs the failures of the store, at most one line per flush interval, and the first
// success after them; it counts each failure.
func (b *Book) outcome(err error, what string, rows int, unflushed uint64) {
	if err == nil {
		if b.failing {
			b.failing = false
			b.log.Info("quota usage reaches the store again")
		}
		return
	}
	b.flushErrors.Inc()
	if errors.Is(err, context.Canceled) {
		return
	}
	b.failing = true
	now := time.Now()
	if now.Sub(b.lastWarn) < b.cfg.FlushInterval {
		return
	}
	b.lastWarn = now
	b.log.Warn("quota usage: the store failed; charges go on from memory and are flushed later",
		zap.String("op", what), zap.Int("rows", rows), zap.Uint64("unflushed_units", unflushed), zap.Error(err))
}

// prune deletes, about once per pruneInterval, the rows of periods that started more than
// retainMonths months before the current month.
func (b *Book) prune(ctx context.Context) {
	now := b.now().UTC()
	if now.Sub(b.lastPrune) < pruneInterval {
		return
	}
	b.lastPrune = now
	before := periodStart(month, now).AddDate(0, -retainMonths, 0)
	var n int64
	err := b.db.Write(ctx, func(tx *store.DBTx) (err error) {
		n, err = tx.PruneUsage(ctx, before)
		return err
	})
	if err != nil {
		b.outcome(fmt.Errorf("quotas: prune usage: %w", err), "prune", 0, 0)
		return
	}
	if n > 0 {
		b.log.Info("quota usage of old periods pruned", zap.Int64("rows", n), zap.Time("before", before))
	}
}
