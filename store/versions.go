package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// The versions of a request after its original (migration 0015 / PostgreSQL 0005): a fee
// bump, a speed-up or a cancel signs the request's nonce again, and each such transaction is
// a tx_versions row, stored with its bytes before it is broadcast. The request row (txs)
// keeps the original's hash and bytes, counts its versions and carries the highest max cost
// of all of them, so the in-flight sums follow a bump.

// Version kinds; the original (the txs row itself) is VersionOriginal.
const (
	VersionOriginal = "original"
	VersionBump     = "bump"    // re-signed by the confirmer with raised fees
	VersionSpeedup  = "speedup" // POST /v1/transactions/{hash}/speedup
	VersionCancel   = "cancel"  // POST /v1/transactions/{hash}/cancel: a zero-value self-transfer
)

// Version states. A version row stores signed or broadcast; mined and replaced follow from the
// request's mined hash (VersionState).
const (
	VersionSigned    = "signed"
	VersionBroadcast = "broadcast"
	VersionMined     = "mined"
	VersionReplaced  = "replaced" // another version of the same nonce was mined
)

// TxVersion is one version of a request after its original.
type TxVersion struct {
	TxID      int64 // the request's txs.id
	Seq       int   // 1, 2, ... in signing order
	ChainID   uint64
	Kind      string
	State     string // as stored: VersionSigned or VersionBroadcast
	Fields    []byte // the signed transaction object, canonical JSON
	MaxCost   *big.Int
	Raw       []byte
	Hash      common.Hash
	CreatedAt time.Time
	UpdatedAt time.Time
}

// VersionState is the state of the version with hash (and stored state stored) of rec: mined
// when rec's mined hash is it, replaced when it is another's, else stored.
func VersionState(rec *TxRecord, hash common.Hash, stored string) string {
	switch {
	case rec.MinedHash == (common.Hash{}):
		return stored
	case rec.MinedHash == hash:
		return VersionMined
	default:
		return VersionReplaced
	}
}

// ErrVersionRace: the request got another version (or left the states a version may be
// added in) since it was read; read it again.
var ErrVersionRace = errors.New("the transaction changed meanwhile")

const versionColumns = `tx_id, seq, chain_id, kind, state, fields, max_cost, raw, hash, created_at, updated_at`

func scanVersion(s scanner) (*TxVersion, error) {
	var (
		v                                   TxVersion
		chainID                             int64
		fields, maxCost, hash, created, upd string
	)
	if err := s.Scan(&v.TxID, &v.Seq, &chainID, &v.Kind, &v.State, &fields, &maxCost, &v.Raw, &hash, &created, &upd); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	v.ChainID = uint64(chainID)
	v.Fields = []byte(fields)
	v.Hash = common.HexToHash(hash)
	var ok bool
	if v.MaxCost, ok = new(big.Int).SetString(maxCost, 10); !ok {
		return nil, fmt.Errorf("tx %d version %d: stored max_cost %q is not a decimal", v.TxID, v.Seq, maxCost)
	}
	var err error
	if v.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if v.UpdatedAt, err = parseTime(upd); err != nil {
		return nil, err
	}
	return &v, nil
}

// AddVersion records v as the next version of rec (whose Versions, MaxCost and State are as
// read): rec's version count goes up by one, its max cost to v's when that is higher (the
// in-flight sums follow, by trigger), and a stuck request is in flight as broadcast again.
// ErrVersionRace when rec got another version since, or is no longer signed, broadcast or
// stuck. v.Seq, CreatedAt and UpdatedAt are set.
func (t *DBTx) AddVersion(ctx context.Context, rec *TxRecord, v *TxVersion) error {
	if err := checkTexts("add version: fields", string(v.Fields)); err != nil {
		return err
	}
	now := time.Now()
	cost := rec.MaxCost
	if v.MaxCost.Cmp(cost) > 0 {
		cost = v.MaxCost
	}
	l, err := costLimbs(cost)
	if err != nil {
		return fmt.Errorf("add version: %w", err)
	}
	res, err := t.ExecContext(ctx, qAddVersion, cost.String(), l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7],
		formatTime(now), rec.ID, int64(rec.Versions))
	if err := oneRow(res, err, "add version"); errors.Is(err, ErrNotFound) {
		return ErrVersionRace
	} else if err != nil {
		return err
	}
	// A stuck request is in flight as broadcast again; a statement of its own, so that the
	// state column is written only when it changes (triggers on state see real changes).
	if _, err := t.ExecContext(ctx, qUnstick, formatTime(now), rec.ID); err != nil {
		return fmt.Errorf("add version: %w", err)
	}
	v.TxID, v.Seq, v.ChainID = rec.ID, rec.Versions+1, rec.ChainID
	if _, err := t.ExecContext(ctx, qInsertVersion, v.TxID, v.Seq, int64(v.ChainID), v.Kind, VersionSigned, string(v.Fields),
		v.MaxCost.String(), v.Raw, hashKey(v.Hash), formatTime(now), formatTime(now)); err != nil {
		return fmt.Errorf("add version: %w", t.classify(err))
	}
	v.State, v.CreatedAt, v.UpdatedAt = VersionSigned, now, now
	rec.Versions, rec.MaxCost = v.Seq, cost
	if rec.State == StateStuck {
		rec.State = StateBroadcast
	}
	return nil
}

// SetVersionBroadcast records that a node accepted version seq of request txID.
func (t *DBTx) SetVersionBroadcast(ctx context.Context, txID int64, seq int) error {
	_, err := t.ExecContext(ctx, qSetVersionBroadcast, formatTime(time.Now()), txID, seq)
	if err != nil {
		return fmt.Errorf("set version broadcast: %w", err)
	}
	return nil
}

// Versions are the versions of request txID after its original, oldest first.
func (t *DBTx) Versions(ctx context.Context, txID int64) ([]*TxVersion, error) {
	rows, err := t.QueryContext(ctx, qVersions, txID)
	if err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	defer rows.Close()
	var out []*TxVersion
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// VersionsByHash are the versions with hash (of any request; normally one).
func (t *DBTx) VersionsByHash(ctx context.Context, hash common.Hash) ([]*TxVersion, error) {
	rows, err := t.QueryContext(ctx, qVersionsByHash, hashKey(hash))
	if err != nil {
		return nil, fmt.Errorf("versions by hash: %w", err)
	}
	defer rows.Close()
	var out []*TxVersion
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// OpenVersionHashes are the hashes of every version of chainID's requests still open (signed,
// broadcast or stuck) that have versions: what a block scan looks for besides the requests'
// own hashes. Requests without versions cost nothing here (a partial index holds only those
// with versions).
func (t *DBTx) OpenVersionHashes(ctx context.Context, chainID uint64) (map[common.Hash]int64, error) {
	rows, err := t.QueryContext(ctx, qOpenVersionHashes, int64(chainID))
	if err != nil {
		return nil, fmt.Errorf("open version hashes: %w", err)
	}
	defer rows.Close()
	var out map[common.Hash]int64
	for rows.Next() {
		var h string
		var id int64
		if err := rows.Scan(&h, &id); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[common.Hash]int64{}
		}
		out[common.HexToHash(h)] = id
	}
	return out, rows.Err()
}

// SetMinedVersion records that version hash of a request of chainID is in block (number,
// blockHash): the request becomes mined (cancelled when the version is a cancel) with hash as
// its mined hash, from signed, broadcast or stuck, or from mined or cancelled in another block
// (a reorg). It returns how many requests changed (0 when hash is no version's).
func (t *DBTx) SetMinedVersion(ctx context.Context, chainID uint64, hash common.Hash, number uint64, blockHash common.Hash) (int64, error) {
	ms, err := t.SetMinedVersionAt(ctx, chainID, hash, number, blockHash)
	return int64(len(ms)), err
}

// Mined is a request a block was found to hold.
type Mined struct {
	ID        int64
	CreatedAt time.Time
	Versions  int    // its versions besides the original: as many were replaced
	State     string // mined, or cancelled
	// Where it was mined, and the hash of the version in the block: read by MinedIn and
	// MinedUpTo (for the receipt checks), zero from SetMinedVersionAt.
	BlockNumber uint64
	BlockHash   common.Hash
	MinedHash   common.Hash
}

func (t *DBTx) queryMined(ctx context.Context, query string, args ...any) ([]Mined, error) {
	return t.queryMinedAt(ctx, false, query, args...)
}

// queryMinedAt reads Mined rows; withBlock: the query selects block_number, block_hash and
// mined_hash after the columns of queryMined.
func (t *DBTx) queryMinedAt(ctx context.Context, withBlock bool, query string, args ...any) ([]Mined, error) {
	rows, err := t.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Mined
	for rows.Next() {
		var m Mined
		var created string
		var versions int64
		dest := []any{&m.ID, &created, &versions, &m.State}
		var block sql.NullInt64
		var blockHash, minedHash sql.NullString
		if withBlock {
			dest = append(dest, &block, &blockHash, &minedHash)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		m.BlockNumber = uint64(block.Int64)
		if blockHash.Valid {
			m.BlockHash = common.HexToHash(blockHash.String)
		}
		if minedHash.Valid {
			m.MinedHash = common.HexToHash(minedHash.String)
		}
		if m.CreatedAt, err = parseTime(created); err != nil {
			return nil, err
		}
		m.Versions = int(versions)
		out = append(out, m)
	}
	return out, rows.Err()
}

// SetMinedVersionAt is SetMinedVersion returning the requests it changed.
func (t *DBTx) SetMinedVersionAt(ctx context.Context, chainID uint64, hash common.Hash, number uint64, blockHash common.Hash) ([]Mined, error) {
	vs, err := t.VersionsByHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	var out []Mined
	for _, v := range vs {
		if v.ChainID != chainID {
			continue
		}
		state := StateMined
		if v.Kind == VersionCancel {
			state = StateCancelled
		}
		ms, err := t.queryMined(ctx, qSetMinedVersion, state, int64(number), hashKey(blockHash), hashKey(hash),
			formatTime(time.Now()), v.TxID, hashKey(blockHash))
		if err != nil {
			return out, fmt.Errorf("set mined version: %w", err)
		}
		out = append(out, ms...)
	}
	return out, nil
}

// MinedIn are the requests of chainID mined (or cancelled) in blocks from..to and updated
// since: what a block scan recorded, read once after it for the metrics.
func (t *DBTx) MinedIn(ctx context.Context, chainID uint64, from, to uint64, since time.Time) ([]Mined, error) {
	ms, err := t.queryMinedAt(ctx, true, qMinedIn, int64(chainID), int64(from), int64(to), formatTime(since))
	if err != nil {
		return nil, fmt.Errorf("mined in: %w", err)
	}
	return ms, nil
}

// MinedUpTo are the mined rows of chainID in blocks at or below number: what Confirm would
// move to confirmed, read before it so that the confirmer checks their receipts first.
func (t *DBTx) MinedUpTo(ctx context.Context, chainID uint64, number uint64) ([]Mined, error) {
	ms, err := t.queryMinedAt(ctx, true, qMinedUpTo, int64(chainID), int64(number))
	if err != nil {
		return nil, fmt.Errorf("mined up to: %w", err)
	}
	return ms, nil
}

// BumpCandidates are up to limit requests of chainID in broadcast or stuck state whose kind
// the service broadcasts (send, filler), by account and nonce: the confirmer's fee bumping
// looks at them.
func (t *DBTx) BumpCandidates(ctx context.Context, chainID uint64, limit int) ([]*TxRecord, error) {
	return t.queryTxs(ctx, qBumpCandidates, int64(chainID), limit)
}

var (
	qAddVersion = prepared(`UPDATE txs SET versions = versions + 1, max_cost = ?,
		cost0 = ?, cost1 = ?, cost2 = ?, cost3 = ?, cost4 = ?, cost5 = ?, cost6 = ?, cost7 = ?, updated_at = ?
		WHERE id = ? AND versions = ? AND state IN ('signed', 'broadcast', 'stuck')`)
	qUnstick             = prepared(`UPDATE txs SET state = 'broadcast', error = NULL, updated_at = ? WHERE id = ? AND state = 'stuck'`)
	qInsertVersion       = prepared(`INSERT INTO tx_versions (` + versionColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qSetVersionBroadcast = prepared(`UPDATE tx_versions SET state = 'broadcast', updated_at = ?
		WHERE tx_id = ? AND seq = ? AND state = 'signed'`)
	qVersions       = prepared(`SELECT ` + versionColumns + ` FROM tx_versions WHERE tx_id = ? ORDER BY seq`)
	qVersionsByHash = prepared(`SELECT ` + versionColumns + ` FROM tx_versions WHERE hash = ? ORDER BY tx_id, seq`)
	// The conditions of txs_versioned, so that the partial index serves it.
	qOpenVersionHashes = prepared(`SELECT v.hash, v.tx_id FROM txs t JOIN tx_versions v ON v.tx_id = t.id
		WHERE t.chain_id = ? AND t.versions > 0 AND t.state IN ('signed', 'broadcast', 'stuck')`)
	qSetMinedVersion = prepared(`UPDATE txs SET state = ?, block_number = ?, block_hash = ?, mined_hash = ?, updated_at = ?,
		    error = CASE WHEN state = 'stuck' THEN NULL ELSE error END
		WHERE id = ? AND (state IN ('signed', 'broadcast', 'stuck') OR (state IN ('mined', 'cancelled') AND block_hash <> ?))
		RETURNING id, created_at, versions, state`)
	qMinedIn = prepared(`SELECT id, created_at, versions, state, block_number, block_hash, mined_hash FROM txs
		WHERE chain_id = ? AND state IN ('mined', 'cancelled') AND block_number >= ? AND block_number <= ? AND updated_at >= ?`)
	qMinedUpTo = prepared(`SELECT id, created_at, versions, state, block_number, block_hash, mined_hash FROM txs
		WHERE chain_id = ? AND state = 'mined' AND block_number <= ?`)
	qBumpCandidates = prepared(`SELECT ` + txColumns + ` FROM txs WHERE chain_id = ? AND state IN ('broadcast', 'stuck')
		AND kind IN ('send', 'filler') ORDER BY address, nonce LIMIT ?`)
)
