package txmgr

// The confirmer's recovery and stale rows: finishing what a crash or an ended request left.

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// recoverBefore bounds the rows the recovery finishes: those not updated since. Alone on its
// store, the process's own requests update rows only after it was created, so every older
// row is a previous run's (the confirmer's first start, or a start after its lease came back).
// Sharing the store with other replicas, a row updated within twice BroadcastTimeout may be
// the work of a request in progress on another replica: it is left to the ticks, which finish
// it once it is that old.
func (t *Manager) recoverBefore() time.Time {
	if t.shared {
		return time.Now().Add(-2 * t.cfg.BroadcastTimeout)
	}
	return t.created
}

// recover finishes every row a previous run left unfinished: reserved rows are signed and
// sent, signed rows sent again, handed-out reserved rows released. Broadcast rows are checked
// whatever their age, those of requests still in progress too: the first pass reads blocks
// from FinalityDepth below the head only, and a transaction mined before that (while this
// replica waited for the lease or the genesis check) would otherwise be seen only at its
// rebroadcast, RebroadcastAfter later. Sending a broadcast row again is harmless (the node
// answers "already known" or takes it once more).
func (c *confirmer) recover(ctx context.Context, before time.Time) {
	c.finishAll(ctx, []string{store.StateReserved, store.StateSigned}, before)
	c.finishAll(ctx, []string{store.StateBroadcast, store.StateStuck}, time.Now())
}

// finishAll runs finish until no row of states older than before is left.
func (c *confirmer) finishAll(ctx context.Context, states []string, before time.Time) {
	for {
		n := c.finish(ctx, states, before)
		if n < maxRowsPerTick || ctx.Err() != nil {
			return
		}
	}
}

// finish handles up to maxRowsPerTick rows in states not updated since before, and returns how
// many it saw.
func (c *confirmer) finish(ctx context.Context, states []string, before time.Time) int {
	var rows []*store.TxRecord
	err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		rows, err = tx.StaleTxs(ctx, c.chainID, states, before, maxRowsPerTick)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("confirmer: reading unfinished transactions failed", zap.Error(err))
		}
		return 0
	}
	for _, rec := range rows {
		if ctx.Err() != nil {
			return len(rows)
		}
		wctx, cancel := context.WithTimeout(ctx, c.t.cfg.BroadcastTimeout)
		c.finishOne(wctx, rec)
		cancel()
	}
	return len(rows)
}

func (c *confirmer) finishOne(ctx context.Context, rec *store.TxRecord) {
	logger := c.log.With(zap.Int64("tx", rec.ID), zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce))
	switch {
	case rec.State == store.StateReserved && rec.Kind == store.KindSign:
		// eth_signTransaction never handed these bytes out: the slot is free again.
		err := c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
			return tx.SetState(ctx, rec.ID, []string{store.StateReserved}, store.StateReleased, "")
		})
		if err != nil {
			logger.Warn("confirmer: releasing a slot failed", zap.Error(err))
		}
		return
	case rec.State == store.StateReserved:
		if _, _, err := c.t.complete(ctx, c.ch, rec, nil); err != nil {
			logger.Warn("confirmer: sending a recovered transaction failed; retrying later", zap.Error(err))
			return
		}
		logger.Info("confirmer: recovered transaction sent", zap.String("hash", rec.Hash.Hex()))
		return
	}
	if rec.Versions > 0 {
		c.rebroadcastVersions(ctx, rec)
		return
	}
	// signed or broadcast: mined already?
	if m, err := c.t.receipt(ctx, c.ch, rec.Hash); err != nil {
		logger.Warn("confirmer: receipt lookup failed", zap.Error(err))
		return
	} else if m != nil {
		var n int64
		err := c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
			var err error
			n, err = tx.SetMined(ctx, c.chainID, rec.Hash, m.number, m.hash)
			return err
		})
		if err != nil {
			logger.Warn("confirmer: recording a mined transaction failed", zap.Error(err))
		} else if n > 0 {
			c.queueCheck(rec, m)
		}
		return
	}
	if _, _, err := c.t.broadcast(ctx, c.ch, rec); err != nil {
		// A stuck request is priced out by definition: its becoming stuck was logged once,
		// its refusals at every rebroadcast are not news.
		level := zap.WarnLevel
		if rec.State == store.StateStuck {
			level = zap.DebugLevel
		}
		logger.Log(level, "confirmer: rebroadcast not accepted; retrying later", zap.Error(err))
	}
	// Restart the rebroadcast clock whatever happened.
	_ = c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error { return tx.Touch(ctx, rec.ID) })
}
