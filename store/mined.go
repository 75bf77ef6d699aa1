package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// qSetMinedMany is qSetMined for an array of hashes (PostgreSQL).
const qSetMinedMany = setMinedSet + `WHERE hash = ANY(CAST(? AS text[])) AND chain_id = ?` + setMinedFrom

// SetMinedMany is SetMined for each of hashes, all in block (number, blockHash); it returns
// how many rows changed. On PostgreSQL it is one statement: the confirmer marks a block's
// transactions in one transaction, and each statement is a round trip and an executor start
// of its own (under a stream of sends a block holds tens of them). On SQLite, whose
// statements cost no round trip, it is SetMined for each hash.
func (t *DBTx) SetMinedMany(ctx context.Context, chainID uint64, hashes []common.Hash, number uint64, blockHash common.Hash) (int64, error) {
	if t.d != postgresDialect {
		var n int64
		for _, h := range hashes {
			m, err := t.SetMined(ctx, chainID, h, number, blockHash)
			if err != nil {
				return n, err
			}
			n += m
		}
		return n, nil
	}
	if len(hashes) == 0 {
		return 0, nil
	}
	keys := make([]string, len(hashes))
	for i, h := range hashes {
		keys[i] = hashKey(h)
	}
	res, err := t.ExecContext(ctx, qSetMinedMany,
		int64(number), hashKey(blockHash), formatTime(time.Now()), keys, int64(chainID), hashKey(blockHash))
	if err != nil {
		return 0, fmt.Errorf("set mined: %w", err)
	}
	return res.RowsAffected()
}
