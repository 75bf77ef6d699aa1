package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// Quota usage rows (migration 0014): the compute units each client id spent per UTC day and per
// UTC calendar month (package quotas keeps the charges in memory and adds them
// here in batches). AddUsage is one atomic upsert that returns the row's new total, so that
// the batches of several replicas add up exactly and each learns the sum of all of them.

// Usage periods (UsageKey.Period).
const (
	UsageDay   = "day"
	UsageMonth = "month"
)

// UsageKey names one row: a client id's usage in the period of its kind that starts at Start.
type UsageKey struct {
	ClientID string
	Period   string // UsageDay or UsageMonth
	Start    time.Time
}

func (k UsageKey) check(what string) error {
	switch {
	case k.ClientID == "":
		return fmt.Errorf("%s: the client id must not be empty", what)
	case k.Period != UsageDay && k.Period != UsageMonth:
		return fmt.Errorf("%s: period must be %q or %q, got %q", what, UsageDay, UsageMonth, k.Period)
	}
	return CheckText(what+": client id", k.ClientID)
}

// maxUnits is the largest total a row holds (a signed 64-bit column); sums saturate there.
const maxUnits = math.MaxInt64

// AddUsage adds units to the row of k (created at 0 when missing) and returns its total after
// the addition, which includes what other replicas added before. The total saturates at
// 2^63-1. One statement: use it in any write transaction, or WriteOne.
func (t *DBTx) AddUsage(ctx context.Context, k UsageKey, units uint64, now time.Time) (total uint64, err error) {
	if err := k.check("add usage"); err != nil {
		return 0, err
	}
	add := int64(min(units, maxUnits))
	var n int64
	if err := t.QueryRowContext(ctx, qAddUsage, k.ClientID, k.Period, formatTime(k.Start), add, formatTime(now)).Scan(&n); err != nil {
		return 0, fmt.Errorf("add usage: %w", err)
	}
	return uint64(n), nil
}

// Usage is the total of the row of k, 0 when there is none (nothing was recorded, or the
// client id cannot be stored).
func (t *DBTx) Usage(ctx context.Context, k UsageKey) (uint64, error) {
	if k.check("usage") != nil {
		return 0, nil
	}
	var n int64
	err := t.QueryRowContext(ctx, qUsage, k.ClientID, k.Period, formatTime(k.Start)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("usage: %w", err)
	}
	return uint64(n), nil
}

// PruneUsage deletes the rows of every period that started before before, and returns how
// many.
func (t *DBTx) PruneUsage(ctx context.Context, before time.Time) (int64, error) {
	res, err := t.ExecContext(ctx, qPruneUsage, formatTime(before))
	if err != nil {
		return 0, fmt.Errorf("prune usage: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune usage: %w", err)
	}
	return n, nil
}

var (
	// The sum saturates instead of overflowing (which both databases refuse, and which would
	// fail every later flush of the row).
	qAddUsage = prepared(`INSERT INTO quota_usage (client_id, period, period_start, units, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (client_id, period, period_start) DO UPDATE SET
			units = CASE WHEN quota_usage.units > 9223372036854775807 - excluded.units THEN 9223372036854775807
				ELSE quota_usage.units + excluded.units END,
			updated_at = excluded.updated_at
		RETURNING units`)
	qUsage      = prepared(`SELECT units FROM quota_usage WHERE client_id = ? AND period = ? AND period_start = ?`)
	qPruneUsage = prepared(`DELETE FROM quota_usage WHERE period_start < ?`)
)
