package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Filter rows (migration 0013): the HTTP filters of eth_newFilter and eth_newBlockFilter, kept
// here so that whichever replica a poll reaches serves it (middleware/filters decides what a
// filter reports; these functions only read and move rows, each in the caller's transaction).
// A filter is found by its key, id, owner and chain together, and only while it lives: not
// past its expiry, not dropped. A poll moves the cursor by compare and swap on seq, so of two
// polls that read the same row only one moves it.

// Filter kinds.
const (
	FilterLogs   = "logs"
	FilterBlocks = "blocks"
)

// FilterCursor is the last block a filter reported: its number and hash.
type FilterCursor struct {
	Number uint64
	Hash   common.Hash
}

// FilterKey names a filter as its owner asks for it: the filter's id on one chain, and who
// asks. A key whose owner or chain is not the filter's finds nothing.
type FilterKey struct {
	ChainID uint64
	ID      string // "0x" and 32 lowercase hex digits
	Owner   string
}

// Filter is one row of filters.
type Filter struct {
	FilterKey
	Kind string // FilterLogs or FilterBlocks
	// Criteria is the logs filter as canonical JSON; empty for a block filter.
	Criteria string
	Cursor   FilterCursor
	// Seq grows by one at each move of the cursor: AdvanceFilter and DropFilter take the seq
	// their caller read and do nothing when it changed since.
	Seq int64
	// Dropped is why the filter was dropped (a poll too large), empty while it lives. A
	// dropped filter is found by Filter, so that its caller can tell, and by nothing else.
	Dropped   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ErrFilterLimit: the owner has as many live filters as CreateFilter allows.
var ErrFilterLimit = errors.New("too many filters")

// CreateFilter records f (its Seq and Dropped are ignored: a new filter starts at seq 0, live)
// unless f's owner has maxPerOwner live filters already (any chain), which is ErrFilterLimit.
// An id in use is ErrExists. It reads the owner's count and then writes, so it needs a
// transaction of Write (on PostgreSQL it locks the owner first, so two creations of one owner
// on two replicas count one after the other).
func (t *DBTx) CreateFilter(ctx context.Context, f *Filter, maxPerOwner int, now time.Time) error {
	switch {
	case f.ID == "" || f.Owner == "":
		return errors.New("create filter: id and owner must not be empty")
	case f.Kind != FilterLogs && f.Kind != FilterBlocks:
		return fmt.Errorf("create filter: kind must be %q or %q, got %q", FilterLogs, FilterBlocks, f.Kind)
	case f.Kind == FilterLogs && f.Criteria == "":
		return errors.New("create filter: a logs filter needs its criteria")
	case f.Cursor.Number > 1<<63-1:
		return fmt.Errorf("create filter: cursor block %d is out of range", f.Cursor.Number)
	}
	if err := checkTexts("create filter: id", f.ID, "create filter: owner", f.Owner, "create filter: criteria", f.Criteria); err != nil {
		return err
	}
	if err := t.lock(ctx, "filters", f.Owner); err != nil {
		return fmt.Errorf("create filter: lock owner: %w", err)
	}
	var n int
	if err := t.QueryRowContext(ctx, qCountOwnerFilters, f.Owner, formatTime(now)).Scan(&n); err != nil {
		return fmt.Errorf("create filter: count the owner's filters: %w", err)
	}
	if n >= maxPerOwner {
		return fmt.Errorf("create filter: %d live filters: %w", n, ErrFilterLimit)
	}
	var criteria sql.NullString
	if f.Criteria != "" {
		criteria = sql.NullString{String: f.Criteria, Valid: true}
	}
	_, err := t.ExecContext(ctx, qInsertFilter, f.ID, int64(f.ChainID), f.Owner, f.Kind, criteria,
		int64(f.Cursor.Number), hashKey(f.Cursor.Hash), formatTime(now), formatTime(f.ExpiresAt))
	if err != nil {
		return fmt.Errorf("create filter: %w", err)
	}
	f.Seq, f.Dropped, f.CreatedAt = 0, "", now
	return nil
}

// Filter is the filter of k, dropped or not, unless it expired by now: else ErrNotFound.
func (t *DBTx) Filter(ctx context.Context, k FilterKey, now time.Time) (*Filter, error) {
	if !validText(k.ID) || !validText(k.Owner) {
		return nil, fmt.Errorf("filter: %w", ErrNotFound)
	}
	f, err := scanFilter(t.QueryRowContext(ctx, qFilter, k.ID, k.Owner, int64(k.ChainID), formatTime(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("filter: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return f, nil
}

// AdvanceFilter moves the cursor of the live filter k to c, its seq by one and its expiry to
// expires, if its seq is still seq. ok is false when it is not (another poll moved it since
// seq was read, or dropped it), or when the filter is gone (expired by now, uninstalled).
func (t *DBTx) AdvanceFilter(ctx context.Context, k FilterKey, seq int64, c FilterCursor, expires, now time.Time) (ok bool, err error) {
	if !validText(k.ID) || !validText(k.Owner) {
		return false, nil
	}
	if c.Number > 1<<63-1 {
		return false, fmt.Errorf("advance filter: cursor block %d is out of range", c.Number)
	}
	res, err := t.ExecContext(ctx, qAdvanceFilter, int64(c.Number), hashKey(c.Hash), formatTime(expires),
		k.ID, k.Owner, int64(k.ChainID), seq, formatTime(now))
	return affected(res, err, "advance filter")
}

// DropFilter marks the live filter k dropped, for reason, if its seq is still seq (as
// AdvanceFilter); ok is false when it is not, or when the filter is gone. The row stays,
// found by Filter, until its expiry.
func (t *DBTx) DropFilter(ctx context.Context, k FilterKey, seq int64, reason string, now time.Time) (ok bool, err error) {
	if !validText(k.ID) || !validText(k.Owner) {
		return false, nil
	}
	if reason == "" {
		return false, errors.New("drop filter: the reason must not be empty")
	}
	res, err := t.ExecContext(ctx, qDropFilter, cleanText(reason), k.ID, k.Owner, int64(k.ChainID), seq, formatTime(now))
	return affected(res, err, "drop filter")
}

// DeleteFilter deletes the live filter k (eth_uninstallFilter); ok is false when there was
// none: never created, another owner's or chain's, expired by now, dropped or deleted.
func (t *DBTx) DeleteFilter(ctx context.Context, k FilterKey, now time.Time) (ok bool, err error) {
	if !validText(k.ID) || !validText(k.Owner) {
		return false, nil
	}
	res, err := t.ExecContext(ctx, qDeleteFilter, k.ID, k.Owner, int64(k.ChainID), formatTime(now))
	return affected(res, err, "delete filter")
}

// SweepFilters deletes every filter that expired by now, dropped or not, and returns how many.
func (t *DBTx) SweepFilters(ctx context.Context, now time.Time) (int64, error) {
	res, err := t.ExecContext(ctx, qSweepFilters, formatTime(now))
	if err != nil {
		return 0, fmt.Errorf("sweep filters: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep filters: %w", err)
	}
	return n, nil
}

// LiveFilters counts the live filters (not expired by now, not dropped) of each chain that
// has any.
func (t *DBTx) LiveFilters(ctx context.Context, now time.Time) (map[uint64]int, error) {
	rows, err := t.QueryContext(ctx, qLiveFilters, formatTime(now))
	if err != nil {
		return nil, fmt.Errorf("count filters: %w", err)
	}
	defer rows.Close()
	out := map[uint64]int{}
	for rows.Next() {
		var chain, n int64
		if err := rows.Scan(&chain, &n); err != nil {
			return nil, fmt.Errorf("count filters: %w", err)
		}
		out[uint64(chain)] = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count filters: %w", err)
	}
	return out, nil
}

// affected is whether the statement res reports changed a row.
func affected(res sql.Result, err error, what string) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return n > 0, nil
}

const filterColumns = `id, chain_id, owner, kind, criteria, cursor_number, cursor_hash, seq, dropped, created_at, expires_at`

func scanFilter(r interface{ Scan(...any) error }) (*Filter, error) {
	var (
		f                     Filter
		chain, number         int64
		criteria, dropped     sql.NullString
		hash, created, expire string
	)
	if err := r.Scan(&f.ID, &chain, &f.Owner, &f.Kind, &criteria, &number, &hash, &f.Seq, &dropped, &created, &expire); err != nil {
		return nil, err
	}
	f.ChainID, f.Cursor.Number, f.Cursor.Hash = uint64(chain), uint64(number), common.HexToHash(hash)
	f.Criteria, f.Dropped = criteria.String, dropped.String
	var err error
	if f.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if f.ExpiresAt, err = parseTime(expire); err != nil {
		return nil, err
	}
	return &f, nil
}

// Every statement on one filter names it by its whole key, and sees it only before its expiry.
const filterKey = ` WHERE id = ? AND owner = ? AND chain_id = ?`

var (
	qCountOwnerFilters = prepared(`SELECT COUNT(*) FROM filters WHERE owner = ? AND expires_at > ? AND dropped IS NULL`)
	qInsertFilter      = prepared(`INSERT INTO filters (id, chain_id, owner, kind, criteria, cursor_number, cursor_hash, seq, dropped, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, NULL, ?, ?)`)
	qFilter        = prepared(`SELECT ` + filterColumns + ` FROM filters` + filterKey + ` AND expires_at > ?`)
	qAdvanceFilter = prepared(`UPDATE filters SET cursor_number = ?, cursor_hash = ?, seq = seq + 1, expires_at = ?` +
		filterKey + ` AND seq = ? AND dropped IS NULL AND expires_at > ?`)
	qDropFilter   = prepared(`UPDATE filters SET dropped = ?, seq = seq + 1` + filterKey + ` AND seq = ? AND dropped IS NULL AND expires_at > ?`)
	qDeleteFilter = prepared(`DELETE FROM filters` + filterKey + ` AND dropped IS NULL AND expires_at > ?`)
	qSweepFilters = prepared(`DELETE FROM filters WHERE expires_at <= ?`)
	qLiveFilters  = prepared(`SELECT chain_id, COUNT(*) FROM filters WHERE expires_at > ? AND dropped IS NULL GROUP BY chain_id`)
)
