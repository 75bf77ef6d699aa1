package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// MetadataRecord is the last answer of a /v1/tokens route for one contract (TokenID "") or
// one token of it.
type MetadataRecord struct {
	ChainID   uint64
	Address   common.Address
	TokenID   string // 0x-hex lowercase without leading zeros; "" for the contract
	Body      []byte // the Token or Contract object, JSON
	Failures  int    // fetches in a row whose document could not be had
	UpdatedAt time.Time
}

var (
	qMetadata    = prepared(`SELECT body, failures, updated_at FROM metadata_records WHERE chain_id = ? AND address = ? AND token_id = ?`)
	qPutMetadata = prepared(`INSERT INTO metadata_records (chain_id, address, token_id, body, failures, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (chain_id, address, token_id) DO UPDATE SET
			body = excluded.body, failures = excluded.failures, updated_at = excluded.updated_at`)
)

// Metadata returns the record of (chainID, addr, tokenID), or ErrNotFound.
func (t *DBTx) Metadata(ctx context.Context, chainID uint64, addr common.Address, tokenID string) (*MetadataRecord, error) {
	r := MetadataRecord{ChainID: chainID, Address: addr, TokenID: tokenID}
	var (
		failures int64
		updated  string
	)
	err := t.QueryRowContext(ctx, qMetadata, int64(chainID), addressKey(addr), tokenID).Scan(&r.Body, &failures, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("metadata record: %w", err)
	}
	r.Failures = int(failures)
	if r.UpdatedAt, err = parseTime(updated); err != nil {
		return nil, fmt.Errorf("metadata record: updated_at: %w", err)
	}
	return &r, nil
}

// PutMetadata inserts r or replaces the record it updates.
func (t *DBTx) PutMetadata(ctx context.Context, r *MetadataRecord) error {
	if r.Failures < 0 {
		return fmt.Errorf("metadata record: failures %d < 0", r.Failures)
	}
	if err := CheckText("metadata record: token id", r.TokenID); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, qPutMetadata, int64(r.ChainID), addressKey(r.Address), r.TokenID, r.Body,
		int64(r.Failures), formatTime(r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("put metadata record: %w", err)
	}
	return nil
}

var qDeleteMetadata = prepared(`DELETE FROM metadata_records WHERE chain_id = ? AND address = ? AND token_id = ?`)

// DeleteMetadata removes the record of (chainID, addr, tokenID), if any.
func (t *DBTx) DeleteMetadata(ctx context.Context, chainID uint64, addr common.Address, tokenID string) error {
	if _, err := t.ExecContext(ctx, qDeleteMetadata, int64(chainID), addressKey(addr), tokenID); err != nil {
		return fmt.Errorf("delete metadata record: %w", err)
	}
	return nil
}

var qDeleteChainMetadata = prepared(`DELETE FROM metadata_records WHERE chain_id = ?`)

// DeleteChainMetadata removes every record of chainID and returns how many there were.
func (t *DBTx) DeleteChainMetadata(ctx context.Context, chainID uint64) (int64, error) {
	res, err := t.ExecContext(ctx, qDeleteChainMetadata, int64(chainID))
	if err != nil {
		return 0, fmt.Errorf("delete metadata records of chain %d: %w", chainID, err)
	}
	return res.RowsAffected()
}
