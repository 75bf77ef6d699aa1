package webhooks

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// Retention (webhooks.retention) is applied by the deliverer, so by one replica at a time, in
// rounds of bounded batches: each batch one DELETE of at most pruneBatch rows in its own write
// transaction, so that no statement holds the store long (SQLite has one writer) and the
// state changes of the requests get in between.
const (
	pruneBatch      = 1000
	pruneMaxBatches = 100 // per table and round: at most 100,000 rows of each a round
	pruneEvery      = time.Minute
)

// pruneLoop runs a round of retention at once and then every s.pruneEvery until ctx ends.
func (s *Service) pruneLoop(ctx context.Context) {
	keep := s.cfg.retention()
	if keep == 0 {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := s.pruneRound(ctx, s.now().Add(-keep)); err != nil && ctx.Err() == nil {
			s.log.Warn("webhook retention: rows not pruned; trying again at the next round", zap.Error(err))
		}
		timer.Reset(s.pruneEvery)
	}
}

// pruneRound deletes what finished before cutoff: the delivered and dead deliveries first,
// then the events no delivery refers to any more (those just freed among them).
func (s *Service) pruneRound(ctx context.Context, cutoff time.Time) error {
	for _, step := range []struct {
		table string
		prune func(tx *store.DBTx) (int64, error)
	}{
		{"deliveries", func(tx *store.DBTx) (int64, error) { return tx.PruneWebhookDeliveries(ctx, cutoff, pruneBatch) }},
		{"events", func(tx *store.DBTx) (int64, error) { return tx.PruneWebhookEvents(ctx, cutoff, pruneBatch) }},
	} {
		for range pruneMaxBatches {
			var n int64
			err := s.db.Write(ctx, func(tx *store.DBTx) error {
				var err error
				n, err = step.prune(tx)
				return err
			})
			if err != nil {
				return err
			}
			s.m.pruned.WithLabelValues(step.table).Add(float64(n))
			if n < pruneBatch {
				break
			}
		}
	}
	return nil
}
