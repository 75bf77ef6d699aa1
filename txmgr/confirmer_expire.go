package txmgr

// The end of hand-outs: nonces eth_signTransaction handed out and not used within HandOutTTL.

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// expire ends the hold of handed-out nonces past their TTL.
func (c *confirmer) expire(ctx context.Context, now time.Time) {
	var rows []*store.TxRecord
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		rows, err = tx.ExpiredHandOuts(ctx, c.chainID, now, maxRowsPerTick)
		return err
	}); err != nil {
		return
	}
	for _, rec := range rows {
		m, err := c.t.receipt(ctx, c.ch, rec.Hash)
		if err != nil {
			return
		}
		var state, reason string
		if m == nil {
			latest, err := c.t.nonceAt(ctx, c.ch, rec.Address, "latest")
			if err != nil {
				return
			}
			state = store.StateReleased
			if latest > rec.Nonce {
				state, reason = store.StateFailed, "nonce used by another transaction"
			}
		}
		var mined int64
		err = c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
			if m != nil {
				var err error
				mined, err = tx.SetMined(ctx, c.chainID, rec.Hash, m.number, m.hash)
				return err
			}
			err := tx.SetState(ctx, rec.ID, []string{store.StateHandedOut}, state, reason)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			c.log.Warn("confirmer: ending a hand-out failed", zap.Int64("tx", rec.ID), zap.Error(err))
		} else if mined > 0 {
			c.queueCheck(rec, m)
		}
	}
}
