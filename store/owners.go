package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

// The NFT owners index (owners/): balances per (chain, contract, token, owner), the indexing
// progress of each chain, the hashes of its recent blocks and the before-images that undo
// them (migration 0006), and nft_minted (0005), all written in the indexer's batches.

// Token standards of a balance row.
const (
	StandardERC721  = 721
	StandardERC1155 = 1155
)

// NFTToken is one token of a contract.
type NFTToken struct {
	Contract common.Address
	ID       uint256.Int
}

// NFTBalanceKey is one (contract, token, owner).
type NFTBalanceKey struct {
	Contract common.Address
	ID       uint256.Int
	Owner    common.Address
}

// NFTBalance is one row of the index: a non-zero amount.
type NFTBalance struct {
	NFTBalanceKey
	Amount   uint256.Int
	Standard int // StandardERC721 or StandardERC1155
}

// uintKey encodes v as stored: its length in bytes, then its big-endian bytes without leading
// zeros (0 is one zero byte), so that byte order is numeric order.
func uintKey(v *uint256.Int) []byte {
	n := v.ByteLen()
	b := make([]byte, 1+n)
	b[0] = byte(n)
	if n > 0 {
		full := v.Bytes32()
		copy(b[1:], full[32-n:])
	}
	return b
}

// parseUintKey decodes what uintKey encodes.
func parseUintKey(b []byte) (uint256.Int, error) {
	var v uint256.Int
	if len(b) == 0 || int(b[0]) != len(b)-1 || b[0] > 32 || (len(b) > 1 && b[1] == 0) {
		return v, fmt.Errorf("malformed uint256 key %x", b)
	}
	v.SetBytes(b[1:])
	return v, nil
}

var (
	qNFTBalancesByKey = chunked(func(n int) string {
		return `SELECT contract, token_id, owner, amount, standard FROM nft_balances
			WHERE chain_id = ? AND (contract, token_id, owner) IN (VALUES ` + blobTuples(n, 3) + `)`
	})
	qNFTBalancesByToken = chunked(func(n int) string {
		return `SELECT contract, token_id, owner, amount, standard FROM nft_balances
			WHERE chain_id = ? AND (contract, token_id) IN (VALUES ` + blobTuples(n, 2) + `)`
	})
	qPutNFTBalances = chunked(func(n int) string {
		return `INSERT INTO nft_balances (chain_id, contract, token_id, owner, amount, standard) VALUES ` + tuples(n, 6) + `
			ON CONFLICT (chain_id, contract, token_id, owner) DO UPDATE SET amount = excluded.amount, standard = excluded.standard`
	})
	qDeleteNFTBalances = chunked(func(n int) string {
		return `DELETE FROM nft_balances WHERE chain_id = ? AND (contract, token_id, owner) IN (VALUES ` + blobTuples(n, 3) + `)`
	})
	qDeleteNFTTokens = chunked(func(n int) string {
		return `DELETE FROM nft_balances WHERE chain_id = ? AND standard = 721 AND (contract, token_id) IN (VALUES ` + blobTuples(n, 2) + `)`
	})
)

// NFTBalancesByKey returns the rows of keys that exist, in no particular order.
func (t *DBTx) NFTBalancesByKey(ctx context.Context, chainID uint64, keys []NFTBalanceKey) ([]NFTBalance, error) {
	var out []NFTBalance
	err := chunks(t.d, qNFTBalancesByKey, []any{int64(chainID)}, len(keys), func(args []any, i int) []any {
		k := &keys[i]
		return append(args, k.Contract.Bytes(), uintKey(&k.ID), k.Owner.Bytes())
	}, func(query string, args []any) error {
		var err error
		out, err = t.scanBalances(ctx, out, query, args)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nft balances: %w", err)
	}
	return dedupBalances(out), nil
}

// NFTBalancesByToken returns every row of the tokens, in no particular order.
func (t *DBTx) NFTBalancesByToken(ctx context.Context, chainID uint64, tokens []NFTToken) ([]NFTBalance, error) {
	var out []NFTBalance
	err := chunks(t.d, qNFTBalancesByToken, []any{int64(chainID)}, len(tokens), func(args []any, i int) []any {
		return append(args, tokens[i].Contract.Bytes(), uintKey(&tokens[i].ID))
	}, func(query string, args []any) error {
		var err error
		out, err = t.scanBalances(ctx, out, query, args)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nft balances of tokens: %w", err)
	}
	return dedupBalances(out), nil
}

// dedupBalances drops rows returned twice: by two chunks, when a caller passed a key twice.
func dedupBalances(rows []NFTBalance) []NFTBalance {
	if len(rows) < 2 {
		return rows
	}
	seen := make(map[NFTBalanceKey]struct{}, len(rows))
	out := rows[:0]
	for _, r := range rows {
		if _, dup := seen[r.NFTBalanceKey]; dup {
			continue
		}
		seen[r.NFTBalanceKey] = struct{}{}
		out = append(out, r)
	}
	return out
}

func (t *DBTx) scanBalances(ctx context.Context, out []NFTBalance, query string, args []any) ([]NFTBalance, error) {
	rows, err := t.QueryContext(ctx, query, args...)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			contract, id, owner, amount []byte
			standard                    int64
		)
		if err := rows.Scan(&contract, &id, &owner, &amount, &standard); err != nil {
			return out, err
		}
		b, err := balanceRow(contract, id, owner, amount, standard)
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func balanceRow(contract, id, owner, amount []byte, standard int64) (NFTBalance, error) {
	var b NFTBalance
	if len(contract) != common.AddressLength || len(owner) != common.AddressLength {
		return b, fmt.Errorf("malformed nft_balances row: contract %x, owner %x", contract, owner)
	}
	b.Contract, b.Owner, b.Standard = common.Address(contract), common.Address(owner), int(standard)
	var err error
	if b.ID, err = parseUintKey(id); err != nil {
		return b, err
	}
	b.Amount, err = parseUintKey(amount)
	return b, err
}

// PutNFTBalances inserts rows or replaces the amounts of the existing ones. Amounts must not
// be zero (a zero balance is deleted, not stored).
func (t *DBTx) PutNFTBalances(ctx context.Context, chainID uint64, rows []NFTBalance) error {
	for i := range rows {
		if rows[i].Amount.IsZero() {
			return fmt.Errorf("put nft balances: zero amount for %x/%s/%x", rows[i].Contract, rows[i].ID.Hex(), rows[i].Owner)
		}
	}
	rows = lastWins(rows, func(r *NFTBalance) NFTBalanceKey { return r.NFTBalanceKey })
	err := t.execChunks(ctx, qPutNFTBalances, nil, len(rows), func(args []any, i int) []any {
		r := &rows[i]
		return append(args, int64(chainID), r.Contract.Bytes(), uintKey(&r.ID), r.Owner.Bytes(), uintKey(&r.Amount), int64(r.Standard))
	})
	if err != nil {
		return fmt.Errorf("put nft balances: %w", err)
	}
	return nil
}

// DeleteNFTBalances removes the rows of keys, where they exist.
func (t *DBTx) DeleteNFTBalances(ctx context.Context, chainID uint64, keys []NFTBalanceKey) error {
	err := t.execChunks(ctx, qDeleteNFTBalances, []any{int64(chainID)}, len(keys), func(args []any, i int) []any {
		k := &keys[i]
		return append(args, k.Contract.Bytes(), uintKey(&k.ID), k.Owner.Bytes())
	})
	if err != nil {
		return fmt.Errorf("delete nft balances: %w", err)
	}
	return nil
}

// DeleteNFTTokens removes the ERC721 rows of the tokens (whoever holds them).
func (t *DBTx) DeleteNFTTokens(ctx context.Context, chainID uint64, tokens []NFTToken) error {
	err := t.execChunks(ctx, qDeleteNFTTokens, []any{int64(chainID)}, len(tokens), func(args []any, i int) []any {
		return append(args, tokens[i].Contract.Bytes(), uintKey(&tokens[i].ID))
	})
	if err != nil {
		return fmt.Errorf("delete nft tokens: %w", err)
	}
	return nil
}

var (
	qNFTTokenPage = prepared(`SELECT contract, token_id, owner, amount, standard FROM nft_balances
		WHERE chain_id = ? AND contract = ? AND token_id = ? AND owner > ? ORDER BY owner LIMIT ?`)
	qNFTContractPage = prepared(`SELECT contract, token_id, owner, amount, standard FROM nft_balances
		WHERE chain_id = ? AND contract = ? AND (token_id, owner) > (?, ?) ORDER BY token_id, owner LIMIT ?`)
)

// NFTBalancesPage appends to dst up to limit rows of contract on chainID, in the order of
// token id then owner: every token's, or with id only that token's. With after, only the
// rows after it in that order (after.Contract is not consulted; with id, only after.Owner).
func (t *DBTx) NFTBalancesPage(ctx context.Context, chainID uint64, contract common.Address, id *uint256.Int, after *NFTBalanceKey, limit int, dst []NFTBalance) ([]NFTBalance, error) {
	var (
		afterID    = []byte{}
		afterOwner = []byte{}
		err        error
	)
	if after != nil {
		afterID, afterOwner = uintKey(&after.ID), after.Owner.Bytes()
	}
	if id != nil {
		dst, err = t.scanBalances(ctx, dst, qNFTTokenPage, []any{int64(chainID), contract.Bytes(), uintKey(id), afterOwner, limit})
	} else {
		dst, err = t.scanBalances(ctx, dst, qNFTContractPage, []any{int64(chainID), contract.Bytes(), afterID, afterOwner, limit})
	}
	if err != nil {
		return dst, fmt.Errorf("nft balances of %x: %w", contract, err)
	}
	return dst, nil
}

var (
	qNFTMinted    = prepared(`SELECT minted FROM nft_minted WHERE chain_id = ? AND contract = ?`)
	qAddNFTMinted = prepared(`INSERT INTO nft_minted (chain_id, contract, minted) VALUES (?, ?, ?)
		ON CONFLICT (chain_id, contract) DO UPDATE SET minted = CASE
			WHEN nft_minted.minted > 9223372036854775807 - excluded.minted THEN 9223372036854775807
			ELSE nft_minted.minted + excluded.minted END`)
	qSetNFTMinted = prepared(`INSERT INTO nft_minted (chain_id, contract, minted) VALUES (?, ?, ?)
		ON CONFLICT (chain_id, contract) DO UPDATE SET minted = excluded.minted`)
	qDeleteNFTMinted = prepared(`DELETE FROM nft_minted WHERE chain_id = ? AND contract = ?`)
)

// NFTMinted returns the tokens minted by contract on chainID as nft_minted counts them; ok is
// false when it has no row.
func (t *DBTx) NFTMinted(ctx context.Context, chainID uint64, contract common.Address) (n int64, ok bool, err error) {
	err = t.QueryRowContext(ctx, qNFTMinted, int64(chainID), addressKey(contract)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("nft minted: %w", err)
	}
	return n, true, nil
}

// AddNFTMinted adds n to contract's count, which saturates at 2^63-1.
func (t *DBTx) AddNFTMinted(ctx context.Context, chainID uint64, contract common.Address, n uint64) error {
	if _, err := t.ExecContext(ctx, qAddNFTMinted, int64(chainID), addressKey(contract), int64(min(n, math.MaxInt64))); err != nil {
		return fmt.Errorf("add nft minted: %w", err)
	}
	return nil
}

// SetNFTMinted sets contract's count to n; ok false removes its row.
func (t *DBTx) SetNFTMinted(ctx context.Context, chainID uint64, contract common.Address, n int64, ok bool) error {
	var err error
	if ok {
		_, err = t.ExecContext(ctx, qSetNFTMinted, int64(chainID), addressKey(contract), n)
	} else {
		_, err = t.ExecContext(ctx, qDeleteNFTMinted, int64(chainID), addressKey(contract))
	}
	if err != nil {
		return fmt.Errorf("set nft minted: %w", err)
	}
	return nil
}

// LockNFTIndex serializes the writers of chainID's index until the end of the transaction
// (see LockAccount): on PostgreSQL, where several processes may index one chain at once, the
// one that takes it second reads the progress the first stored before deciding anything.
func (t *DBTx) LockNFTIndex(ctx context.Context, chainID uint64) error {
	if err := t.lock(ctx, "nft index", strconv.FormatUint(chainID, 10)); err != nil {
		return fmt.Errorf("lock the nft index of chain %d: %w", chainID, err)
	}
	return nil
}

// NFTIndexProgress is how far a chain is indexed.
type NFTIndexProgress struct {
	ChainID   uint64
	Scope     string // what the index covers (the indexer's start block and contracts)
	Block     uint64 // the last block whose logs are applied
	Hash      common.Hash
	UpdatedAt time.Time
}

var (
	qNFTIndexProgress    = prepared(`SELECT scope, block_number, block_hash, updated_at FROM nft_index_progress WHERE chain_id = ?`)
	qPutNFTIndexProgress = prepared(`INSERT INTO nft_index_progress (chain_id, scope, block_number, block_hash, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (chain_id) DO UPDATE SET scope = excluded.scope,
			block_number = excluded.block_number, block_hash = excluded.block_hash, updated_at = excluded.updated_at`)
)

// NFTIndexProgress returns the progress of chainID, or ErrNotFound when nothing is indexed.
func (t *DBTx) NFTIndexProgress(ctx context.Context, chainID uint64) (*NFTIndexProgress, error) {
	p := NFTIndexProgress{ChainID: chainID}
	var (
		block   int64
		hash    []byte
		updated string
	)
	err := t.QueryRowContext(ctx, qNFTIndexProgress, int64(chainID)).Scan(&p.Scope, &block, &hash, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("nft index progress: %w", err)
	}
	if len(hash) != common.HashLength || block < 0 {
		return nil, fmt.Errorf("nft index progress of chain %d: malformed row", chainID)
	}
	p.Block, p.Hash = uint64(block), common.Hash(hash)
	if p.UpdatedAt, err = parseTime(updated); err != nil {
		return nil, fmt.Errorf("nft index progress: updated_at: %w", err)
	}
	return &p, nil
}

// PutNFTIndexProgress records p.
func (t *DBTx) PutNFTIndexProgress(ctx context.Context, p *NFTIndexProgress) error {
	if p.Block > math.MaxInt64 {
		return fmt.Errorf("nft index progress: block %d out of range", p.Block)
	}
	if err := CheckText("nft index progress: scope", p.Scope); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, qPutNFTIndexProgress, int64(p.ChainID), p.Scope, int64(p.Block), p.Hash.Bytes(), formatTime(p.UpdatedAt))
	if err != nil {
		return fmt.Errorf("put nft index progress: %w", err)
	}
	return nil
}

// NFTIndexBlock is the hash of an indexed block; Undo when the block's changes can be undone
// (its before-images are recorded).
type NFTIndexBlock struct {
	Number uint64
	Hash   common.Hash
	Undo   bool
}

var (
	qPutNFTIndexBlocks = chunked(func(n int) string {
		return `INSERT INTO nft_index_blocks (chain_id, block_number, block_hash, undo) VALUES ` + tuples(n, 4) + `
			ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = excluded.block_hash, undo = excluded.undo`
	})
	qNFTIndexBlocks = prepared(`SELECT block_number, block_hash, undo FROM nft_index_blocks
		WHERE chain_id = ? AND block_number > ? ORDER BY block_number DESC`)
)

// PutNFTIndexBlocks records the hashes of blocks.
func (t *DBTx) PutNFTIndexBlocks(ctx context.Context, chainID uint64, blocks []NFTIndexBlock) error {
	blocks = lastWins(blocks, func(b *NFTIndexBlock) uint64 { return b.Number })
	err := t.execChunks(ctx, qPutNFTIndexBlocks, nil, len(blocks), func(args []any, i int) []any {
		b := &blocks[i]
		undo := 0
		if b.Undo {
			undo = 1
		}
		return append(args, int64(chainID), int64(b.Number), b.Hash.Bytes(), undo)
	})
	if err != nil {
		return fmt.Errorf("put nft index blocks: %w", err)
	}
	return nil
}

// NFTIndexBlocks returns the recorded blocks of chainID above block number above, newest
// first.
func (t *DBTx) NFTIndexBlocks(ctx context.Context, chainID uint64, above uint64) ([]NFTIndexBlock, error) {
	rows, err := t.QueryContext(ctx, qNFTIndexBlocks, int64(chainID), int64(min(above, math.MaxInt64)))
	if err != nil {
		return nil, fmt.Errorf("nft index blocks: %w", err)
	}
	defer rows.Close()
	var out []NFTIndexBlock
	for rows.Next() {
		var (
			n    int64
			hash []byte
			undo int64
		)
		if err := rows.Scan(&n, &hash, &undo); err != nil {
			return nil, fmt.Errorf("nft index blocks: %w", err)
		}
		if len(hash) != common.HashLength {
			return nil, fmt.Errorf("nft index blocks: malformed hash of block %d", n)
		}
		out = append(out, NFTIndexBlock{Number: uint64(n), Hash: common.Hash(hash), Undo: undo == 1})
	}
	return out, rows.Err()
}

// Kinds of NFTUndo.
const (
	NFTUndoOwner   = 1 // the owner of an ERC721 token
	NFTUndoBalance = 2 // an ERC1155 balance
	NFTUndoMinted  = 3 // a contract's nft_minted count
)

// NFTUndo is the before-image of one change made by an indexed block.
type NFTUndo struct {
	Block    uint64
	Seq      int // order of the change within the block
	Kind     int // NFTUndoOwner, NFTUndoBalance or NFTUndoMinted
	Contract common.Address
	ID       uint256.Int     // kinds owner and balance
	Owner    *common.Address // owner: the previous owner (nil: none); balance: whose balance
	Amount   *uint256.Int    // balance: the previous amount (nil: none)
	Minted   *int64          // minted: the previous count (nil: no row)
}

var (
	qPutNFTUndo = chunked(func(n int) string {
		// DO NOTHING: the padding of a chunk repeats its last record.
		return `INSERT INTO nft_undo (chain_id, block_number, seq, kind, contract, token_id, owner, amount, minted) VALUES ` + tuples(n, 9) + `
			ON CONFLICT (chain_id, block_number, seq) DO NOTHING`
	})
	qNFTUndo = prepared(`SELECT block_number, seq, kind, contract, token_id, owner, amount, minted FROM nft_undo
		WHERE chain_id = ? AND block_number > ? ORDER BY block_number DESC, seq DESC`)
)

// PutNFTUndo records before-images. Each (Block, Seq) must be new: a record whose key exists
// is not written.
func (t *DBTx) PutNFTUndo(ctx context.Context, chainID uint64, undo []NFTUndo) error {
	for i := range undo {
		u := &undo[i]
		if u.Kind < NFTUndoOwner || u.Kind > NFTUndoMinted || (u.Kind == NFTUndoBalance && u.Owner == nil) {
			return fmt.Errorf("put nft undo: malformed record %+v", *u)
		}
	}
	err := t.execChunks(ctx, qPutNFTUndo, nil, len(undo), func(args []any, i int) []any {
		u := &undo[i]
		var id, owner, amount, minted any
		if u.Kind != NFTUndoMinted {
			id = uintKey(&u.ID)
		}
		if u.Owner != nil {
			owner = u.Owner.Bytes()
		}
		if u.Amount != nil {
			amount = uintKey(u.Amount)
		}
		if u.Minted != nil {
			minted = *u.Minted
		}
		return append(args, int64(chainID), int64(u.Block), int64(u.Seq), int64(u.Kind), u.Contract.Bytes(), id, owner, amount, minted)
	})
	if err != nil {
		return fmt.Errorf("put nft undo: %w", err)
	}
	return nil
}

// NFTUndo returns the before-images of chainID's blocks above block number above, newest
// first (the order that undoes them).
func (t *DBTx) NFTUndo(ctx context.Context, chainID uint64, above uint64) ([]NFTUndo, error) {
	rows, err := t.QueryContext(ctx, qNFTUndo, int64(chainID), int64(min(above, math.MaxInt64)))
	if err != nil {
		return nil, fmt.Errorf("nft undo: %w", err)
	}
	defer rows.Close()
	var out []NFTUndo
	for rows.Next() {
		var (
			block, seq, kind              int64
			contract, id, owner, amountKB []byte
			minted                        sql.NullInt64
		)
		if err := rows.Scan(&block, &seq, &kind, &contract, &id, &owner, &amountKB, &minted); err != nil {
			return nil, fmt.Errorf("nft undo: %w", err)
		}
		u := NFTUndo{Block: uint64(block), Seq: int(seq), Kind: int(kind)}
		if len(contract) != common.AddressLength {
			return nil, fmt.Errorf("nft undo: malformed contract of block %d", block)
		}
		u.Contract = common.Address(contract)
		if id != nil {
			if u.ID, err = parseUintKey(id); err != nil {
				return nil, fmt.Errorf("nft undo: %w", err)
			}
		}
		if owner != nil {
			if len(owner) != common.AddressLength {
				return nil, fmt.Errorf("nft undo: malformed owner of block %d", block)
			}
			o := common.Address(owner)
			u.Owner = &o
		}
		if amountKB != nil {
			a, err := parseUintKey(amountKB)
			if err != nil {
				return nil, fmt.Errorf("nft undo: %w", err)
			}
			u.Amount = &a
		}
		if minted.Valid {
			m := minted.Int64
			u.Minted = &m
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

var (
	qRewindNFTBlocks = prepared(`DELETE FROM nft_index_blocks WHERE chain_id = ? AND block_number > ?`)
	qRewindNFTUndo   = prepared(`DELETE FROM nft_undo WHERE chain_id = ? AND block_number > ?`)
	qPruneNFTBlocks  = prepared(`DELETE FROM nft_index_blocks WHERE chain_id = ? AND block_number < ?`)
	qPruneNFTUndo    = prepared(`DELETE FROM nft_undo WHERE chain_id = ? AND block_number < ?`)
)

// RewindNFTIndex removes the block hashes and before-images of chainID's blocks above block
// number to (after a rollback has restored them).
func (t *DBTx) RewindNFTIndex(ctx context.Context, chainID, to uint64) error {
	for _, q := range []string{qRewindNFTBlocks, qRewindNFTUndo} {
		if _, err := t.ExecContext(ctx, q, int64(chainID), int64(min(to, math.MaxInt64))); err != nil {
			return fmt.Errorf("rewind nft index: %w", err)
		}
	}
	return nil
}

// PruneNFTIndex removes the block hashes and before-images of chainID's blocks below block
// number below: blocks too deep for a reorg to reach.
func (t *DBTx) PruneNFTIndex(ctx context.Context, chainID, below uint64) error {
	for _, q := range []string{qPruneNFTBlocks, qPruneNFTUndo} {
		if _, err := t.ExecContext(ctx, q, int64(chainID), int64(min(below, math.MaxInt64))); err != nil {
			return fmt.Errorf("prune nft index: %w", err)
		}
	}
	return nil
}

// DeleteNFTIndex removes everything indexed of chainID: balances, nft_minted, progress, block
// hashes and before-images. It returns how many balance rows there were.
func (t *DBTx) DeleteNFTIndex(ctx context.Context, chainID uint64) (int64, error) {
	res, err := t.ExecContext(ctx, `DELETE FROM nft_balances WHERE chain_id = ?`, int64(chainID))
	if err != nil {
		return 0, fmt.Errorf("delete nft index of chain %d: %w", chainID, err)
	}
	n, _ := res.RowsAffected()
	for _, table := range []string{"nft_minted", "nft_index_progress", "nft_index_blocks", "nft_undo"} {
		if _, err := t.ExecContext(ctx, `DELETE FROM `+table+` WHERE chain_id = ?`, int64(chainID)); err != nil {
			return 0, fmt.Errorf("delete nft index of chain %d: %s: %w", chainID, table, err)
		}
	}
	return n, nil
}
