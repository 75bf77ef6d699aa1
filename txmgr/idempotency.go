package txmgr

// Idempotency-Key replays: a repeated send answered with the first one's hash.

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

func (t *Manager) byIdempotencyKey(ctx context.Context, principal, key string) (*store.TxRecord, error) {
	var rec *store.TxRecord
	err := t.db.ReadOne(ctx, func(tx *store.DBTx) error {
		var err error
		rec, err = tx.TxByIdempotencyKey(ctx, principal, key)
		return err
	})
	return rec, err
}

// idempotencyPoll is how often a repeated request looks at the first one's progress.
const idempotencyPoll = 20 * time.Millisecond

// awaitIdempotent answers a request whose Idempotency-Key was used already: the same hash
// once the first request's transaction was accepted, its error if it failed.
func (t *Manager) awaitIdempotent(ctx context.Context, rec *store.TxRecord, request []byte) (common.Hash, error) {
	sent := rec.Request
	if sent == nil {
		sent = rec.Fields
	}
	if string(sent) != string(request) {
		return common.Hash{}, ErrIdempotencyMismatch
	}
	deadline := time.Now().Add(t.cfg.BroadcastTimeout)
	for {
		switch rec.State {
		case store.StateBroadcast, store.StateStuck, store.StateMined, store.StateConfirmed, store.StateCancelled:
			return rec.Hash, nil // the original hash, whichever version was mined
		case store.StateFailed:
			if rec.BlockHash != (common.Hash{}) {
				return rec.Hash, nil // sent and mined, then reverted: the send itself succeeded
			}
			return common.Hash{}, jsonrpc.ErrInvalidParams.Withf("the transaction of this Idempotency-Key failed: %s", rec.Error)
		}
		if time.Now().After(deadline) {
			return common.Hash{}, notAccepted(rec, jsonrpc.ErrUpstreamTimeout)
		}
		select {
		case <-ctx.Done():
			return common.Hash{}, ctx.Err()
		case <-time.After(idempotencyPoll):
		}
		var err error
		if err = t.db.ReadOne(ctx, func(tx *store.DBTx) error {
			rec, err = tx.TxByID(ctx, rec.ID)
			return err
		}); err != nil {
			return common.Hash{}, err
		}
	}
}
