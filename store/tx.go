package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// Tx is one database transaction. Queries use `?` placeholders whatever the database; a
// duplicate key surfaces as an error matching ErrExists.
type Tx struct {
	tx *sql.Tx
	d  *dialect
}

// ExecContext runs a statement that returns no rows.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	r, err := t.tx.ExecContext(ctx, t.d.rebind(query), args...)
	if err != nil {
		return nil, t.classify(err)
	}
	return r, nil
}

// QueryContext runs a query that returns rows.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.d.rebind(query), args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(query), args...)
}

func (t *Tx) classify(err error) error {
	if t.d.isUniqueViolation(err) {
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	return err
}

// Write runs fn in one write transaction: committed if fn returns nil, rolled back if it
// returns an error or panics (the panic continues after the rollback). Writers are serialized;
// one waits for the others (or for ctx) rather than failing with SQLITE_BUSY.
//
// Within fn, use only tx: calling Write again from fn waits for the connection fn holds and so
// blocks until ctx ends, and a Read from fn does not see fn's own uncommitted writes.
func (db *DB) Write(ctx context.Context, fn func(tx *Tx) error) error {
	return db.run(ctx, db.write, nil, fn)
}

// Read runs fn in one read-only transaction, on a snapshot that concurrent writes do not
// change. A write statement in fn fails.
func (db *DB) Read(ctx context.Context, fn func(tx *Tx) error) error {
	return db.run(ctx, db.read, &sql.TxOptions{ReadOnly: true}, fn)
}

func (db *DB) run(ctx context.Context, pool *sql.DB, opts *sql.TxOptions, fn func(tx *Tx) error) error {
	stx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		// fn returned an error or panicked: undo its work, then let the panic continue.
		if rerr := stx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			db.log.Error("store rollback failed", zap.Error(rerr))
		}
	}()
	if err := fn(&Tx{tx: stx, d: db.d}); err != nil {
		return err
	}
	done = true
	if err := stx.Commit(); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("commit: %w", cerr)
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
