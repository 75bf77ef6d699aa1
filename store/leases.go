package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Lease rows (migration 0012): who runs a job that must run in one process at a time, until
// when. The lease package decides the timings; these functions only read and move rows, each
// in the caller's transaction. On SQLite a write transaction holds the file's write lock from
// its start, so the read and the write of AcquireLease see no other writer in between; the
// epoch guard of the update and the primary key keep it right where that is not so.

// Lease is one row of leases.
type Lease struct {
	Name string
	// Holder is whoever took the lease last (the lease package writes "<replica id>/<tag>").
	Holder string
	// Epoch grows by one at each acquisition: a fencing token, and the count of hand-overs.
	Epoch int64
	// ExpiresAt is when the lease may be taken over; a holder that stopped cleanly set it to
	// its stop time.
	ExpiresAt  time.Time
	AcquiredAt time.Time
	RenewedAt  time.Time
}

// AcquireLease takes the lease name for holder until expires, when no row exists, when its
// expiry is not after now, or when holder holds it already; the epoch grows by one. ok is
// false when another holder's unexpired lease stands; l is then that lease.
func (t *DBTx) AcquireLease(ctx context.Context, name, holder string, now, expires time.Time) (l *Lease, ok bool, err error) {
	return t.AcquireLeaseFrom(ctx, name, holder, "", now, expires)
}

// AcquireLeaseFrom is AcquireLease that also takes an unexpired lease whose holder starts
// with predecessors (when not empty): an earlier process of the same replica, which a crash
// left holding it.
func (t *DBTx) AcquireLeaseFrom(ctx context.Context, name, holder, predecessors string, now, expires time.Time) (l *Lease, ok bool, err error) {
	if name == "" || holder == "" {
		return nil, false, errors.New("acquire lease: name and holder must not be empty")
	}
	cur, err := t.Lease(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		l = &Lease{Name: name, Holder: holder, Epoch: 1, ExpiresAt: expires, AcquiredAt: now, RenewedAt: now}
		_, err := t.ExecContext(ctx, qInsertLease, name, holder, l.Epoch, formatTime(expires), formatTime(now), formatTime(now))
		if errors.Is(err, ErrExists) {
			// Inserted by another writer meanwhile (possible only where writers are not
			// serialized): theirs.
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("acquire lease %s: %w", name, err)
		}
		return l, true, nil
	case err != nil:
		return nil, false, err
	}
	if cur.Holder != holder && cur.ExpiresAt.After(now) && (predecessors == "" || !strings.HasPrefix(cur.Holder, predecessors)) {
		return cur, false, nil
	}
	l = &Lease{Name: name, Holder: holder, Epoch: cur.Epoch + 1, ExpiresAt: expires, AcquiredAt: now, RenewedAt: now}
	res, err := t.ExecContext(ctx, qTakeLease, holder, l.Epoch, formatTime(expires), formatTime(now), formatTime(now), name, cur.Epoch)
	if err := oneRow(res, err, "acquire lease "+name); errors.Is(err, ErrNotFound) {
		return nil, false, nil // taken by another writer meanwhile
	} else if err != nil {
		return nil, false, err
	}
	return l, true, nil
}

// RenewLease moves the expiry of the lease name that holder took at epoch to expires;
// ErrNotFound when holder does not hold it at that epoch (any more).
func (t *DBTx) RenewLease(ctx context.Context, name, holder string, epoch int64, now, expires time.Time) error {
	res, err := t.ExecContext(ctx, qRenewLease, formatTime(expires), formatTime(now), name, holder, epoch)
	return oneRow(res, err, "renew lease "+name)
}

// ReleaseLease ends the hold that holder took on name at epoch: the lease expires at now, and
// the next process asking takes it at once. ErrNotFound when holder does not hold it at that
// epoch (any more).
func (t *DBTx) ReleaseLease(ctx context.Context, name, holder string, epoch int64, now time.Time) error {
	res, err := t.ExecContext(ctx, qRenewLease, formatTime(now), formatTime(now), name, holder, epoch)
	return oneRow(res, err, "release lease "+name)
}

// Lease is the row of name, or ErrNotFound.
func (t *DBTx) Lease(ctx context.Context, name string) (*Lease, error) {
	l, err := scanLease(t.QueryRowContext(ctx, qLease, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lease %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", name, err)
	}
	return l, nil
}

// Leases are every lease row, by name.
func (t *DBTx) Leases(ctx context.Context) ([]*Lease, error) {
	rows, err := t.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	defer rows.Close()
	var out []*Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("leases: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	return out, nil
}

const leaseColumns = `name, holder, epoch, expires_at, acquired_at, renewed_at`

func scanLease(r interface{ Scan(...any) error }) (*Lease, error) {
	var (
		l                          Lease
		expires, acquired, renewed string
	)
	if err := r.Scan(&l.Name, &l.Holder, &l.Epoch, &expires, &acquired, &renewed); err != nil {
		return nil, err
	}
	var err error
	if l.ExpiresAt, err = parseTime(expires); err != nil {
		return nil, err
	}
	if l.AcquiredAt, err = parseTime(acquired); err != nil {
		return nil, err
	}
	if l.RenewedAt, err = parseTime(renewed); err != nil {
		return nil, err
	}
	return &l, nil
}

var (
	qLease       = prepared(`SELECT ` + leaseColumns + ` FROM leases WHERE name = ?`)
	qInsertLease = prepared(`INSERT INTO leases (` + leaseColumns + `) VALUES (?, ?, ?, ?, ?, ?)`)
	qTakeLease   = prepared(`UPDATE leases SET holder = ?, epoch = ?, expires_at = ?, acquired_at = ?, renewed_at = ? WHERE name = ? AND epoch = ?`)
	// Renewing and releasing: a release is a renewal until now.
	qRenewLease = prepared(`UPDATE leases SET expires_at = ?, renewed_at = ? WHERE name = ? AND holder = ? AND epoch = ?`)
)
