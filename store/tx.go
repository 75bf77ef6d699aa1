package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Tx is one database transaction. Queries use `?` placeholders whatever the database; a
// duplicate key surfaces as an error matching ErrExists.
//
// The queries of the hot paths are registered with prepared and prepared once per pool at
// Open (SQLite spends more time parsing a small statement than running it); any other query
// runs unprepared.
type Tx struct {
	tx    *sql.Tx
	d     *dialect
	stmts *stmtCache
}

// stmtCache holds the prepared statements of one pool, by query text.
type stmtCache struct {
	m map[string]*sql.Stmt
}

// get is the prepared statement of query, or nil when query was not registered with
// prepared (it then runs unprepared). It never prepares: preparing needs a connection, and
// the write pool's only connection is the one the calling transaction holds.
func (c *stmtCache) get(query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	return c.m[query] // filled at Open, read-only afterwards
}

// preparedQueries are the queries registered with prepared, prepared on both pools at Open.
var preparedQueries []string

// prepared registers query, a constant of a repository, to be prepared once at Open, and
// returns it.
func prepared(query string) string {
	preparedQueries = append(preparedQueries, query)
	return query
}

// prepareAll prepares every registered query on pool. A query the pool refuses (a write on
// the read-only pool, a table a test's own migration set does not have) is left out and
// runs unprepared, failing there if it is wrong.
func prepareAll(ctx context.Context, pool *sql.DB, d *dialect) *stmtCache {
	c := &stmtCache{m: map[string]*sql.Stmt{}}
	for _, q := range preparedQueries {
		q = d.rebind(q)
		if _, ok := c.m[q]; ok {
			continue
		}
		if st, err := pool.PrepareContext(ctx, q); err == nil {
			c.m[q] = st
		}
	}
	return c
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	for _, st := range c.m {
		_ = st.Close()
	}
	c.m = nil
}

// lazyStmts are statements of the read pool prepared on first use, for queries whose text
// is known only at run time (the product list's, which depend on the configured sold rule).
// A query is prepared outside any transaction (preparing takes a connection of the pool),
// at most maxLazyStmts of them; any further query runs unprepared.
type lazyStmts struct {
	m      sync.Map // query text → *sql.Stmt
	n      atomic.Int32
	closed atomic.Bool
}

const maxLazyStmts = 256

// get returns the prepared statement of query on pool, preparing it if needed; nil when the
// cache is full or closed (the caller runs the query unprepared).
func (c *lazyStmts) get(ctx context.Context, pool *sql.DB, query string) (*sql.Stmt, error) {
	if st, ok := c.m.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	if c.closed.Load() || c.n.Load() >= maxLazyStmts {
		return nil, nil
	}
	st, err := pool.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := c.m.LoadOrStore(query, st); loaded {
		_ = st.Close() // prepared at the same time by another caller
		return prev.(*sql.Stmt), nil
	}
	c.n.Add(1)
	return st, nil
}

func (c *lazyStmts) close() {
	c.closed.Store(true)
	c.m.Range(func(k, v any) bool {
		_ = v.(*sql.Stmt).Close()
		c.m.Delete(k)
		return true
	})
}

// stmt is the transaction's handle on the prepared form of query, or nil.
func (t *Tx) stmt(ctx context.Context, query string) *sql.Stmt {
	st := t.stmts.get(query)
	if st == nil {
		return nil
	}
	return t.tx.StmtContext(ctx, st)
}

// ExecContext runs a statement that returns no rows.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	query = t.d.rebind(query)
	var r sql.Result
	var err error
	if st := t.stmt(ctx, query); st != nil {
		r, err = st.ExecContext(ctx, args...)
	} else {
		r, err = t.tx.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return nil, t.classify(err)
	}
	return r, nil
}

// QueryContext runs a query that returns rows.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query = t.d.rebind(query)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	query = t.d.rebind(query)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
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
	return db.run(ctx, db.write, db.writeStmts, nil, fn)
}

// Read runs fn in one read-only transaction, on a snapshot that concurrent writes do not
// change. A write statement in fn fails.
func (db *DB) Read(ctx context.Context, fn func(tx *Tx) error) error {
	return db.run(ctx, db.read, db.readStmts, &sql.TxOptions{ReadOnly: true}, fn)
}

func (db *DB) run(ctx context.Context, pool *sql.DB, stmts *stmtCache, opts *sql.TxOptions, fn func(tx *Tx) error) error {
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
	if err := fn(&Tx{tx: stx, d: db.d, stmts: stmts}); err != nil {
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
