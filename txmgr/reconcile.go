package txmgr

// Reconciling "nonce too low": our transaction was mined already, or the nonce used elsewhere.

import (
	"context"
	"errors"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// reconcile handles "nonce too low": if one of our attempts at this nonce is mined, the nonce
// was ours; otherwise the nonce was used outside web3gate, the row fails, the nonce head moves
// past the chain's nonce, and the caller may retry with a new nonce.
func (t *Manager) reconcile(ctx context.Context, ch Chain, rec *store.TxRecord) (common.Hash, bool, error) {
	var attempts []*store.TxRecord
	if err := t.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		attempts, err = tx.TxsAtNonce(ctx, rec.ChainID, rec.Address, rec.Nonce)
		return err
	}); err != nil {
		return common.Hash{}, false, err
	}
	for _, a := range attempts {
		if a.Versions > 0 {
			// Any of its versions may be the one mined.
			mined, err := t.settle(ctx, ch, a)
			if err != nil {
				return common.Hash{}, false, err
			}
			if a.ID == rec.ID && (mined || a.State == store.StateBroadcast || a.State == store.StateStuck) {
				// Ours: mined, or a later version of it holds the nonce in the node's pool
				// (a version added since rec was read).
				return rec.Hash, false, nil
			}
			continue
		}
		if !a.HasHash() {
			continue
		}
		mined, err := t.receipt(ctx, ch, a.Hash)
		if err != nil {
			return common.Hash{}, false, err
		}
		if mined == nil {
			continue
		}
		_ = t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
			_, err := tx.SetMined(ctx, rec.ChainID, a.Hash, mined.number, mined.hash)
			return err
		})
		if a.Hash == rec.Hash {
			return rec.Hash, false, nil // ours, mined already
		}
	}
	pending, err := t.nonceAt(ctx, ch, rec.Address, "pending")
	if err != nil {
		return common.Hash{}, false, err
	}
	err = t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		if err := tx.SetState(ctx, rec.ID, []string{store.StateSigned, store.StateBroadcast, store.StateStuck, store.StateReserved}, store.StateFailed,
			"nonce used by another transaction"); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// Nothing was sent: the retry with a new nonce carries the idempotency key on.
		if err := tx.ClearIdempotencyKey(ctx, rec.ID); err != nil {
			return err
		}
		return tx.RaiseNextNonce(ctx, rec.ChainID, rec.Address, pending)
	})
	if err != nil {
		return common.Hash{}, false, err
	}
	t.log.Warn("nonce used outside web3gate", proxy.RequestIDField(ctx), zap.Uint64("chain", rec.ChainID), zap.String("from", rec.Address.Hex()),
		zap.Uint64("nonce", rec.Nonce), zap.Uint64("chain_pending_nonce", pending))
	return common.Hash{}, true, jsonrpc.ErrInvalidParams.Withf("nonce %d of %s was used by a transaction web3gate did not sign; nothing was sent, retry",
		rec.Nonce, rec.Address.Hex())
}
