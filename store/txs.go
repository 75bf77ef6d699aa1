package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// The transaction rows (txs): their states and kinds, inserting, reading and moving them
// through their states. The nonce heads and the reads a reservation decides on are in
// nonces.go.

// Transaction states. The nonce manager (wallet) moves a row through them; docs/signing.md
// draws the transitions.
const (
	StateReserved  = "reserved"   // nonce taken, fields recorded, not signed yet
	StateSigned    = "signed"     // signed bytes persisted, no node has accepted them yet
	StateBroadcast = "broadcast"  // a node accepted the bytes
	StateMined     = "mined"      // in a canonical block, fewer than finalityDepth blocks deep
	StateConfirmed = "confirmed"  // finalityDepth blocks deep
	StateFailed    = "failed"     // will never be mined; its slot was given up (see Error)
	StateHandedOut = "handed_out" // eth_signTransaction: the caller submits, until ExpiresAt
	StateReleased  = "released"   // a handed-out slot not used in time, free for the next signing
	StateAbandoned = "abandoned"  // its chain started over from a new genesis: never sent again, its nonce not reused
	// StateStuck: the next fee bump would pass a cap (wallet.transactions.bump.maxFeeCap, the
	// signing rules, the funds): still in flight and rebroadcast; it may still be mined, sped
	// up with explicit fees or cancelled.
	StateStuck = "stuck"
	// StateCancelled: the cancel version (a zero-value self-transfer at the nonce) was mined.
	StateCancelled = "cancelled"
)

// Fee-bump choices a caller made with the X-Fee-Bump header (TxRecord.FeeBump).
const (
	FeeBumpAllow = "allow"
	FeeBumpDeny  = "deny"
)

// Transaction kinds.
const (
	KindSend   = "send"   // eth_sendTransaction: the service broadcasts
	KindSign   = "sign"   // eth_signTransaction: the caller broadcasts
	KindFiller = "filler" // a zero-value self-transfer filling a slot that could not be used
)

// TxRecord is one transaction the service signed or is about to sign.
type TxRecord struct {
	ID        int64
	ChainID   uint64
	Address   common.Address // the sender
	Nonce     uint64
	Principal string
	Kind      string
	State     string
	Fields    []byte // the validated, complete transaction object, canonical JSON
	// Request is the object as the client sent it (canonical JSON) when web3gate filled
	// fields in; nil when it is Fields. An Idempotency-Key is compared with it.
	Request []byte
	// Filled names the fields web3gate filled in ("gas", "maxFeePerGas", ...).
	Filled         []string
	MaxCost        *big.Int // gas * price + value, wei
	Raw            []byte   // signed bytes; nil before signing
	Hash           common.Hash
	IdempotencyKey string
	BlockNumber    uint64 // 0: not in a block
	BlockHash      common.Hash
	Error          string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time // handed_out rows only
	// MinedHash is the hash of the version in the block (Hash, or a later version's): zero
	// until mined.
	MinedHash common.Hash
	// FeeBump is the caller's X-Fee-Bump choice (FeeBumpAllow, FeeBumpDeny), "" when none.
	FeeBump string
	// Versions is how many versions were signed after the original (tx_versions rows).
	Versions int
}

// HasHash reports whether the row was signed.
func (r *TxRecord) HasHash() bool { return r.Hash != (common.Hash{}) }

const txColumns = `id, chain_id, address, nonce, principal, kind, state, fields, max_cost, raw, hash,
	idempotency_key, block_number, block_hash, error, created_at, updated_at, expires_at, request, filled,
	mined_hash, fee_bump, versions`

func scanTx(s scanner) (*TxRecord, error) {
	var (
		r                                    TxRecord
		addr, fields, maxCost, created, upd  string
		hash, idem, blockHash, errMsg, expir sql.NullString
		request, filled, minedHash, feeBump  sql.NullString
		block                                sql.NullInt64
		chainID, nonce, versions             int64
	)
	if err := s.Scan(&r.ID, &chainID, &addr, &nonce, &r.Principal, &r.Kind, &r.State, &fields, &maxCost,
		&r.Raw, &hash, &idem, &block, &blockHash, &errMsg, &created, &upd, &expir, &request, &filled,
		&minedHash, &feeBump, &versions); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	r.ChainID, r.Nonce = uint64(chainID), uint64(nonce)
	r.Address = common.HexToAddress(addr)
	r.Fields = []byte(fields)
	if request.Valid {
		r.Request = []byte(request.String)
	}
	if filled.String != "" {
		r.Filled = strings.Split(filled.String, ",")
	}
	var ok bool
	if r.MaxCost, ok = new(big.Int).SetString(maxCost, 10); !ok {
		return nil, fmt.Errorf("tx %d: stored max_cost %q is not a decimal", r.ID, maxCost)
	}
	if hash.Valid {
		r.Hash = common.HexToHash(hash.String)
	}
	r.IdempotencyKey = idem.String
	if block.Valid {
		r.BlockNumber = uint64(block.Int64)
	}
	if blockHash.Valid {
		r.BlockHash = common.HexToHash(blockHash.String)
	}
	r.Error = errMsg.String
	if minedHash.Valid {
		r.MinedHash = common.HexToHash(minedHash.String)
	}
	r.FeeBump, r.Versions = feeBump.String, int(versions)
	var err error
	if r.CreatedAt, err = parseTime(created); err != nil {
		return nil, fmt.Errorf("tx %d: created_at: %w", r.ID, err)
	}
	if r.UpdatedAt, err = parseTime(upd); err != nil {
		return nil, fmt.Errorf("tx %d: updated_at: %w", r.ID, err)
	}
	if expir.Valid {
		if r.ExpiresAt, err = parseTime(expir.String); err != nil {
			return nil, fmt.Errorf("tx %d: expires_at: %w", r.ID, err)
		}
	}
	return &r, nil
}

func hashKey(h common.Hash) string { return strings.ToLower(h.Hex()) }

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// costLimbs are the eight 32-bit limbs of a non-negative cost below 2^256, least
// significant first.
func costLimbs(c *big.Int) ([8]int64, error) {
	var l [8]int64
	if c.Sign() < 0 || c.BitLen() > 256 {
		return l, fmt.Errorf("max cost %s is outside 0..2^256-1", c)
	}
	var buf [32]byte
	c.FillBytes(buf[:])
	for i := range l {
		// buf is big-endian: limb i is bytes [28-4i, 32-4i).
		o := 28 - 4*i
		l[i] = int64(buf[o])<<24 | int64(buf[o+1])<<16 | int64(buf[o+2])<<8 | int64(buf[o+3])
	}
	return l, nil
}

// InsertTxs records every row of rs in one statement, in their order, and sets their ID,
// CreatedAt and UpdatedAt. A row that conflicts (a live row at its nonce, an idempotency key
// used already) fails the whole statement with ErrExists: it is for rows that cannot (a
// reservation group under the account's lock, without idempotency keys).
func (t *DBTx) InsertTxs(ctx context.Context, rs []*TxRecord) error {
	if len(rs) == 0 {
		return nil
	}
	now := time.Now()
	args := make([]any, 0, len(rs)*26)
	var q strings.Builder
	q.WriteString(insertTxHead)
	for i, r := range rs {
		row, err := insertTxArgs(r, now)
		if err != nil {
			return err
		}
		args = append(args, row...)
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + placeholders(len(row)) + ")")
	}
	q.WriteString(" RETURNING id")
	rows, err := t.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return fmt.Errorf("insert txs: %w", t.classify(err))
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		if i == len(rs) {
			return fmt.Errorf("insert txs: more ids returned than rows inserted")
		}
		if err := rows.Scan(&rs[i].ID); err != nil {
			return fmt.Errorf("insert txs: %w", err)
		}
		rs[i].CreatedAt, rs[i].UpdatedAt = now, now
		i++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert txs: %w", t.classify(err))
	}
	if i != len(rs) {
		return fmt.Errorf("insert txs: %d ids returned for %d rows", i, len(rs))
	}
	return nil
}

// insertTxArgs are the values of r's row, in insertTxHead's columns.
func insertTxArgs(r *TxRecord, now time.Time) ([]any, error) {
	if err := checkTexts("insert tx: principal", r.Principal, "insert tx: idempotency key", r.IdempotencyKey,
		"insert tx: fields", string(r.Fields), "insert tx: request", string(r.Request), "insert tx: filled", strings.Join(r.Filled, ",")); err != nil {
		return nil, err
	}
	var hash, expires sql.NullString
	if r.HasHash() {
		hash = nullString(hashKey(r.Hash))
	}
	if !r.ExpiresAt.IsZero() {
		expires = nullString(formatTime(r.ExpiresAt))
	}
	cost := r.MaxCost
	if cost == nil {
		cost = new(big.Int)
	}
	l, err := costLimbs(cost)
	if err != nil {
		return nil, fmt.Errorf("insert tx: %w", err)
	}
	return []any{int64(r.ChainID), addressKey(r.Address), int64(r.Nonce), r.Principal, r.Kind, r.State, string(r.Fields),
		cost.String(), l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7],
		r.Raw, hash, nullString(r.IdempotencyKey), nullString(cleanText(r.Error)),
		formatTime(now), formatTime(now), expires, nullString(string(r.Request)), nullString(strings.Join(r.Filled, ",")),
		nullString(r.FeeBump)}, nil
}

// InsertTx records r and sets r.ID, r.CreatedAt and r.UpdatedAt. A live row at the same
// nonce, or the principal's idempotency key used already, is ErrExists.
func (t *DBTx) InsertTx(ctx context.Context, r *TxRecord) error {
	now := time.Now()
	args, err := insertTxArgs(r, now)
	if err != nil {
		return err
	}
	err = t.QueryRowContext(ctx, qInsertTx, args...).Scan(&r.ID)
	if err != nil {
		return fmt.Errorf("insert tx: %w", t.classify(err))
	}
	r.CreatedAt, r.UpdatedAt = now, now
	return nil
}

// SetSigned stores the signed bytes and hash of row id and moves it to state (signed, or
// handed_out for eth_signTransaction), from reserved only; ErrNotFound when it was not
// reserved.
func (t *DBTx) SetSigned(ctx context.Context, id int64, raw []byte, hash common.Hash, state string) error {
	res, err := t.ExecContext(ctx, qSetSigned, raw, hashKey(hash), state, formatTime(time.Now()), id)
	return oneRow(res, err, "set signed")
}

// SetState moves row id to state, only from one of the states in from; ErrNotFound when it was
// in none of them. errMsg, when not empty, is recorded as the row's error.
func (t *DBTx) SetState(ctx context.Context, id int64, from []string, state, errMsg string) error {
	q := setStateQuery(len(from))
	args := []any{state, nullString(cleanText(errMsg)), formatTime(time.Now()), id}
	for _, f := range from {
		args = append(args, f)
	}
	res, err := t.ExecContext(ctx, q, args...)
	return oneRow(res, err, "set state")
}

// SetMined records that the transaction hash of chainID is in block (number, blockHash), for
// a row that was signed, broadcast or handed out, or mined in another block (a reorg moved
// it). It returns how many rows changed.
func (t *DBTx) SetMined(ctx context.Context, chainID uint64, hash common.Hash, number uint64, blockHash common.Hash) (int64, error) {
	res, err := t.ExecContext(ctx, qSetMined,
		int64(number), hashKey(blockHash), formatTime(time.Now()), hashKey(hash), int64(chainID), hashKey(blockHash))
	if err != nil {
		return 0, fmt.Errorf("set mined: %w", err)
	}
	return res.RowsAffected()
}

// SetReverted moves row id, mined in block blockHash, to failed with reason (the
// transaction reverted on chain): from mined only, so that the webhook trigger sees mined ->
// failed. Its block, block hash and mined hash stay set, which tells it apart from a
// transaction failed before it was mined (Unmine and MinedSince look at it as at a mined
// one). It reports whether the row changed (not when it left mined or that block meanwhile).
func (t *DBTx) SetReverted(ctx context.Context, id int64, blockHash common.Hash, reason string) (bool, error) {
	res, err := t.ExecContext(ctx, qSetReverted, nullString(cleanText(reason)), formatTime(time.Now()), id, hashKey(blockHash))
	if err != nil {
		return false, fmt.Errorf("set reverted: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// Unmine moves the mined rows of chainID in block (number, blockHash) back to broadcast: the
// block left the canonical chain. Rows that reverted in it (failed, with that block) go back
// too, their revert reason cleared: in another block they may not revert.
func (t *DBTx) Unmine(ctx context.Context, chainID uint64, number uint64, blockHash common.Hash) (int64, error) {
	res, err := t.ExecContext(ctx, qUnmine,
		formatTime(time.Now()), int64(chainID), int64(number), hashKey(blockHash))
	if err != nil {
		return 0, fmt.Errorf("unmine: %w", err)
	}
	return res.RowsAffected()
}

// Confirm moves the mined rows of chainID at or below block number to confirmed.
func (t *DBTx) Confirm(ctx context.Context, chainID uint64, number uint64) (int64, error) {
	res, err := t.ExecContext(ctx, qConfirm,
		formatTime(time.Now()), int64(chainID), int64(number))
	if err != nil {
		return 0, fmt.Errorf("confirm: %w", err)
	}
	return res.RowsAffected()
}

func oneRow(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// TxByID is row id, or ErrNotFound.
func (t *DBTx) TxByID(ctx context.Context, id int64) (*TxRecord, error) {
	return scanTx(t.QueryRowContext(ctx, qTxByID, id))
}

// TxByIdempotencyKey is principal's row with key, or ErrNotFound.
func (t *DBTx) TxByIdempotencyKey(ctx context.Context, principal, key string) (*TxRecord, error) {
	if !validText(principal) || !validText(key) {
		return nil, ErrNotFound // no stored row has such text
	}
	return scanTx(t.QueryRowContext(ctx, qTxByIdempotencyKey,
		principal, key))
}

// TxsByHash are the rows with hash, newest first (one, except for a slot signed again).
func (t *DBTx) TxsByHash(ctx context.Context, hash common.Hash) ([]*TxRecord, error) {
	return t.queryTxs(ctx, qTxsByHash, hashKey(hash))
}

// TxsAtNonce are the rows of (chainID, addr) at nonce, oldest first.
func (t *DBTx) TxsAtNonce(ctx context.Context, chainID uint64, addr common.Address, nonce uint64) ([]*TxRecord, error) {
	return t.queryTxs(ctx, qTxsAtNonce,
		int64(chainID), addressKey(addr), int64(nonce))
}

// MinedSince are the mined (and cancelled, and reverted: failed in a block) rows of chainID
// in blocks at or above number.
func (t *DBTx) MinedSince(ctx context.Context, chainID uint64, number uint64) ([]*TxRecord, error) {
	return t.queryTxs(ctx, `SELECT `+txColumns+` FROM txs WHERE chain_id = ?
		AND (state IN ('mined', 'cancelled') OR (state = 'failed' AND block_hash IS NOT NULL)) AND block_number >= ?
		ORDER BY block_number`, int64(chainID), int64(number))
}

func (t *DBTx) queryTxs(ctx context.Context, query string, args ...any) ([]*TxRecord, error) {
	rows, err := t.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*TxRecord
	for rows.Next() {
		r, err := scanTx(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SetHandedOut stores the signed bytes of reserved row id for eth_signTransaction and holds the
// nonce for the caller until expires.
func (t *DBTx) SetHandedOut(ctx context.Context, id int64, raw []byte, hash common.Hash, expires time.Time) error {
	res, err := t.ExecContext(ctx, qSetHandedOut, raw, hashKey(hash), formatTime(expires), formatTime(time.Now()), id)
	return oneRow(res, err, "set handed out")
}

// ExpiredHandOuts are up to limit handed-out rows of chainID whose hold ended before now.
func (t *DBTx) ExpiredHandOuts(ctx context.Context, chainID uint64, now time.Time, limit int) ([]*TxRecord, error) {
	return t.queryTxs(ctx, `SELECT `+txColumns+` FROM txs WHERE chain_id = ? AND state = 'handed_out' AND expires_at < ?
		ORDER BY expires_at LIMIT ?`, int64(chainID), formatTime(now), limit)
}

// StaleTxs are up to limit rows of chainID in one of states not updated since before.
func (t *DBTx) StaleTxs(ctx context.Context, chainID uint64, states []string, before time.Time, limit int) ([]*TxRecord, error) {
	args := []any{int64(chainID)}
	for _, s := range states {
		args = append(args, s)
	}
	args = append(args, formatTime(before), limit)
	return t.queryTxs(ctx, `SELECT `+txColumns+` FROM txs WHERE chain_id = ? AND state IN (`+placeholders(len(states))+`)
		AND updated_at < ? ORDER BY address, nonce, id LIMIT ?`, args...)
}

// ClearIdempotencyKey frees the idempotency key of row id for another row.
func (t *DBTx) ClearIdempotencyKey(ctx context.Context, id int64) error {
	_, err := t.ExecContext(ctx, `UPDATE txs SET idempotency_key = NULL WHERE id = ?`, id)
	return err
}

// Touch sets the updated_at of row id to now (a rebroadcast).
func (t *DBTx) Touch(ctx context.Context, id int64) error {
	_, err := t.ExecContext(ctx, qTouch, formatTime(time.Now()), id)
	return err
}

// AbandonChain gives up every transaction of chainID not abandoned yet, whatever its state:
// the chain started over from a new genesis, so none of them exists on it. Each becomes
// abandoned (never sent again, out of the in-flight counts, its nonce free) with reason and
// its former state as its error, and frees its idempotency key for a new transaction; the
// chain's nonce heads are dropped, so the next reservation of each account takes its nonce
// from the node again. It returns how many rows it abandoned.
func (t *DBTx) AbandonChain(ctx context.Context, chainID uint64, reason string) (int64, error) {
	res, err := t.ExecContext(ctx, qAbandonChain, cleanText(reason), formatTime(time.Now()), int64(chainID))
	if err != nil {
		return 0, fmt.Errorf("abandon chain %d: %w", chainID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("abandon chain %d: %w", chainID, err)
	}
	if _, err := t.ExecContext(ctx, qDropNonceHeads, int64(chainID)); err != nil {
		return 0, fmt.Errorf("abandon chain %d: drop nonce heads: %w", chainID, err)
	}
	return n, nil
}

// HasOpenTxs reports whether chainID has rows the confirmer must follow.
func (t *DBTx) HasOpenTxs(ctx context.Context, chainID uint64) (bool, error) {
	var one int
	err := t.QueryRowContext(ctx, qHasOpenTxs,
		int64(chainID)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// OpenStates are the states of the rows not settled yet, those CountOpenTxs counts.
var OpenStates = []string{StateReserved, StateSigned, StateHandedOut, StateBroadcast, StateStuck, StateMined}

// CountOpenTxs counts chainID's rows in each of OpenStates (a state without rows is absent).
func (t *DBTx) CountOpenTxs(ctx context.Context, chainID uint64) (map[string]int, error) {
	rows, err := t.QueryContext(ctx, qCountOpenTxs, int64(chainID))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, err
		}
		counts[state] = n
	}
	return counts, rows.Err()
}

// setMinedSet and setMinedFrom are the parts of qSetMined (and of qSetMinedMany, its form for
// a block's hashes at once) around the choice of rows: the states a row is mined from, or
// mined again in another block (a reorg moved it).
const (
	setMinedSet = `UPDATE txs SET state = 'mined', block_number = ?, block_hash = ?, updated_at = ?, mined_hash = hash,
		    error = CASE WHEN state = 'stuck' THEN NULL ELSE error END
		`
	setMinedFrom = `
		  AND (state IN ('signed', 'broadcast', 'stuck', 'handed_out', 'released')
		       OR (state IN ('mined', 'cancelled') AND block_hash <> ?))`
)

// insertTxHead is the INSERT of txs rows up to their VALUES.
const insertTxHead = `INSERT INTO txs (chain_id, address, nonce, principal, kind, state, fields,
		max_cost, cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7,
		raw, hash, idempotency_key, error, created_at, updated_at, expires_at, request, filled, fee_bump)
		VALUES `

// Queries prepared once at Open (see prepared).
var (
	qInsertTx  = prepared(insertTxHead + `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
	qSetSigned = prepared(`UPDATE txs SET raw = ?, hash = ?, state = ?, updated_at = ?
		WHERE id = ? AND state = 'reserved'`)
	// +chain_id keeps the planner on txs_hash: without statistics SQLite may otherwise take
	// the (chain_id, state) index and scan every open row of the chain for each hash.
	// A request with versions is found by its original hash here, by a later version's in
	// SetMinedVersion (store/versions.go).
	qSetMined = prepared(setMinedSet + `WHERE hash = ? AND +chain_id = ?` + setMinedFrom)
	// A failed row with a block hash reverted in that block (SetReverted); one failed before
	// it was mined has none, and block_hash = ? leaves it alone.
	qUnmine = prepared(`UPDATE txs SET state = 'broadcast', block_number = NULL, block_hash = NULL, mined_hash = NULL, updated_at = ?,
		    error = CASE WHEN state = 'failed' THEN NULL ELSE error END
		WHERE chain_id = ? AND state IN ('mined', 'cancelled', 'failed') AND block_number = ? AND block_hash = ?`)
	qSetReverted = prepared(`UPDATE txs SET state = 'failed', error = ?, updated_at = ?
		WHERE id = ? AND state = 'mined' AND block_hash = ?`)
	qConfirm = prepared(`UPDATE txs SET state = 'confirmed', updated_at = ?
		WHERE chain_id = ? AND state = 'mined' AND block_number <= ?`)
	qSetHandedOut = prepared(`UPDATE txs SET raw = ?, hash = ?, state = 'handed_out', expires_at = ?, updated_at = ?
		WHERE id = ? AND state = 'reserved'`)
	qTouch        = prepared(`UPDATE txs SET updated_at = ? WHERE id = ?`)
	qCountOpenTxs = prepared(`SELECT state, COUNT(*) FROM txs WHERE chain_id = ? AND state IN ('reserved', 'signed', 'handed_out', 'broadcast', 'stuck', 'mined') GROUP BY state`)
	qHasOpenTxs   = prepared(`SELECT 1 FROM txs WHERE chain_id = ? AND state IN ('signed', 'broadcast', 'stuck', 'mined', 'handed_out') LIMIT 1`)
	qAbandonChain = prepared(`UPDATE txs SET state = 'abandoned', error = ? || ' (it was ' || state || ')',
		idempotency_key = NULL, updated_at = ? WHERE chain_id = ? AND state <> 'abandoned'`)
	qDropNonceHeads = prepared(`DELETE FROM nonce_heads WHERE chain_id = ?`)
)

// setStateQuery is SetState's statement for n from-states; the usual counts are prepared.
func setStateQuery(n int) string {
	return `UPDATE txs SET state = ?, error = COALESCE(?, error), updated_at = ? WHERE id = ? AND state IN (` +
		placeholders(n) + `)`
}

var _ = func() bool {
	for n := 1; n <= 4; n++ {
		prepared(setStateQuery(n))
	}
	return true
}()

var (
	qTxByID             = prepared(`SELECT ` + txColumns + ` FROM txs WHERE id = ?`)
	qTxByIdempotencyKey = prepared(`SELECT ` + txColumns + ` FROM txs WHERE principal = ? AND idempotency_key = ?`)
	qTxsByHash          = prepared(`SELECT ` + txColumns + ` FROM txs WHERE hash = ? ORDER BY id DESC`)
	qTxsAtNonce         = prepared(`SELECT ` + txColumns + ` FROM txs WHERE chain_id = ? AND address = ? AND nonce = ? ORDER BY id`)
)
