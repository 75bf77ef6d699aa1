package txmgr

// Status lookup: a principal's transaction by any of its hashes.

import (
	"context"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/store"
)

// Transaction is principal's transaction with hash, or store.ErrNotFound (also for another
// principal's transaction).
func (t *Manager) Transaction(ctx context.Context, principal string, hash common.Hash) (*store.TxRecord, error) {
	var recs []*store.TxRecord
	if err := t.db.ReadOne(ctx, func(tx *store.DBTx) error {
		var err error
		recs, err = tx.TxsByHash(ctx, hash)
		return err
	}); err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Principal == principal {
			return r, nil
		}
	}
	// A later version's hash (a bump, speed-up or cancel) finds its request too.
	var found *store.TxRecord
	if err := t.db.ReadOne(ctx, func(tx *store.DBTx) error {
		vs, err := tx.VersionsByHash(ctx, hash)
		if err != nil {
			return err
		}
		for _, v := range vs {
			r, err := tx.TxByID(ctx, v.TxID)
			if err != nil {
				return err
			}
			if r.Principal == principal {
				found = r
				return nil
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if found == nil {
		return nil, store.ErrNotFound
	}
	return found, nil
}
