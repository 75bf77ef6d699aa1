package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// The genesis hash recorded per chain (migration 0009): how a chain that started over under
// the same chain id is told from the one the stored nonces and transactions belong to.

// ChainGenesis is the genesis hash recorded for chainID; ok is false when none is.
func (t *DBTx) ChainGenesis(ctx context.Context, chainID uint64) (hash common.Hash, ok bool, err error) {
	var h string
	err = t.QueryRowContext(ctx, qChainGenesis, int64(chainID)).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return common.Hash{}, false, nil
	}
	if err != nil {
		return common.Hash{}, false, fmt.Errorf("chain genesis: %w", err)
	}
	return common.HexToHash(h), true, nil
}

// RecordChainGenesis records hash as the genesis of chainID, replacing any recorded before.
func (t *DBTx) RecordChainGenesis(ctx context.Context, chainID uint64, hash common.Hash) error {
	if _, err := t.ExecContext(ctx, qRecordChainGenesis, int64(chainID), hashKey(hash), formatTime(time.Now())); err != nil {
		return fmt.Errorf("record chain genesis: %w", err)
	}
	return nil
}

var (
	qChainGenesis       = prepared(`SELECT hash FROM chain_genesis WHERE chain_id = ?`)
	qRecordChainGenesis = prepared(`INSERT INTO chain_genesis (chain_id, hash, recorded_at) VALUES (?, ?, ?)
		ON CONFLICT (chain_id) DO UPDATE SET hash = excluded.hash, recorded_at = excluded.recorded_at`)
)
