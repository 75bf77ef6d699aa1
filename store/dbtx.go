package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
)

// DBTx is one database transaction. Queries use `?` placeholders whatever the database; a
// duplicate key surfaces as an error matching ErrExists.
//
// The queries of the hot paths are registered with prepared and prepared once per pool at
// Open (SQLite spends more time parsing a small statement than running it); any other query
// runs unprepared.
type DBTx struct {
	sqlTx *sql.Tx
	// one, instead of sqlTx, is the pool of a single statement run on its own (ReadOne,
	// WriteOne on PostgreSQL): it commits by itself.
	one   *sql.DB
	d     *dialect
	stmts *stmtCache
	// outer is the context the transaction was begun with, and bounded that context with the
	// store's transaction deadline (nil: none). Statements run under the deadline whatever
	// context they are given (bound).
	outer, bounded context.Context
	cancels        []context.CancelFunc // of contexts bound derived, released at the end
}

// bound is ctx limited by the transaction's deadline: a statement on a server that stopped
// answering ends with it, whatever context its caller gave.
func (t *DBTx) bound(ctx context.Context) context.Context {
	if t.bounded == nil || ctx == t.bounded {
		return ctx
	}
	if ctx == t.outer {
		return t.bounded
	}
	d, _ := t.bounded.Deadline()
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx
	}
	c, cancel := context.WithDeadline(ctx, d)
	t.cancels = append(t.cancels, cancel)
	return c
}

// release ends the contexts bound derived.
func (t *DBTx) release() {
	for _, c := range t.cancels {
		c()
	}
	t.cancels = nil
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
func (t *DBTx) stmt(ctx context.Context, query string) *sql.Stmt {
	st := t.stmts.get(query)
	if st == nil || t.sqlTx == nil {
		return nil
	}
	return t.sqlTx.StmtContext(ctx, st)
}

// ExecContext runs a statement that returns no rows.
func (t *DBTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = t.bound(ctx)
	query = t.d.rebind(query)
	var r sql.Result
	var err error
	if st := t.stmt(ctx, query); st != nil {
		r, err = st.ExecContext(ctx, args...)
	} else if t.one != nil {
		r, err = t.one.ExecContext(ctx, query, args...)
	} else {
		r, err = t.sqlTx.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return nil, t.classify(err)
	}
	return r, nil
}

// QueryContext runs a query that returns rows.
func (t *DBTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = t.bound(ctx)
	query = t.d.rebind(query)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	if t.one != nil {
		return t.one.QueryContext(ctx, query, args...)
	}
	return t.sqlTx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (t *DBTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = t.bound(ctx)
	query = t.d.rebind(query)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	if t.one != nil {
		return t.one.QueryRowContext(ctx, query, args...)
	}
	return t.sqlTx.QueryRowContext(ctx, query, args...)
}

// LockAccount serializes the transactions that decide something for the account addr on
// chainID from what they read (a nonce reservation reads the nonce head and the released
// slots, then writes): on PostgreSQL it takes an advisory lock of the transaction on the
// account, released at commit or rollback, so a second reservation of the account, in this
// process or another, waits and then reads what the first wrote. On SQLite, where one writer
// holds the whole database, it does nothing. Call it first in the transaction.
func (t *DBTx) LockAccount(ctx context.Context, chainID uint64, addr common.Address) error {
	if err := t.lock(ctx, "account", strconv.FormatUint(chainID, 10), addressKey(addr)); err != nil {
		return fmt.Errorf("lock account %s on chain %d: %w", addr.Hex(), chainID, err)
	}
	return nil
}

// LockChain serializes the transactions that decide something for a whole chain from what
// they read (the genesis check, which may abandon the chain's rows), as LockAccount does for
// one account. Call it first in the transaction.
func (t *DBTx) LockChain(ctx context.Context, chainID uint64) error {
	if err := t.lock(ctx, "chain", strconv.FormatUint(chainID, 10)); err != nil {
		return fmt.Errorf("lock chain %d: %w", chainID, err)
	}
	return nil
}

// lock takes the transaction-scoped lock named by parts (see LockAccount).
func (t *DBTx) lock(ctx context.Context, parts ...string) error {
	if t.d.lockQuery == "" {
		return nil
	}
	if t.sqlTx == nil {
		return errors.New("store: a lock needs a transaction (ReadOne and WriteOne run one statement alone)")
	}
	_, err := t.sqlTx.ExecContext(t.bound(ctx), t.d.rebind(t.d.lockQuery), lockKey(parts...))
	return err
}

func (t *DBTx) classify(err error) error {
	if t.d.isUniqueViolation(err) {
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	return err
}

// Write runs fn in one write transaction: committed if fn returns nil, rolled back if it
// returns an error or panics (the panic continues after the rollback). On SQLite writers are
// serialized; one waits for the others (or for ctx) rather than failing with SQLITE_BUSY. On
// PostgreSQL they run at once (READ COMMITTED): fn that reads and then writes on what it read
// takes a lock first (LockAccount), and fn must not go on after a failed statement, which
// aborts a PostgreSQL transaction (return the error; ON CONFLICT in the statement where a
// duplicate is expected).
//
// Within fn, use only dbtx: calling Write again from fn waits for the connection fn holds and so
// blocks until ctx ends, and a Read from fn does not see fn's own uncommitted writes.
func (db *DB) Write(ctx context.Context, fn func(dbtx *DBTx) error) error {
	return db.run(ctx, db.write, db.writeStmts, db.writeOpts(), fn)
}

// writeOpts are the options of a write transaction: SQLite's are the pool's (BEGIN
// IMMEDIATE); on PostgreSQL, READ COMMITTED (each statement sees what was committed before
// it; read-then-write decisions take a lock first, see LockAccount).
func (db *DB) writeOpts() *sql.TxOptions {
	if db.d == postgresDialect {
		return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return nil
}

// readOpts: a read-only transaction; on PostgreSQL REPEATABLE READ, one snapshot for the
// whole transaction, as a SQLite reader in WAL mode has.
func (db *DB) readOpts() *sql.TxOptions {
	if db.d == postgresDialect {
		return &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}
	}
	return &sql.TxOptions{ReadOnly: true}
}

// Read runs fn in one read-only transaction, on a snapshot that concurrent writes do not
// change. A write statement in fn fails.
func (db *DB) Read(ctx context.Context, fn func(dbtx *DBTx) error) error {
	return db.run(ctx, db.read, db.readStmts, db.readOpts(), fn)
}

// run runs fn in a transaction of pool. With a transaction timeout (PostgreSQL), the wait for
// a connection, every statement and the commit end by its deadline; a failure that means the
// database cannot serve is returned as ErrUnavailable (unavailable.go).
func (db *DB) run(ctx context.Context, pool *sql.DB, stmts *stmtCache, opts *sql.TxOptions, fn func(dbtx *DBTx) error) error {
	return db.runFor(ctx, db.txTimeout, pool, stmts, opts, fn)
}

// ReadOne runs fn, which makes exactly one query, like Read. On PostgreSQL the query runs on
// its own, without BEGIN and COMMIT around it: one round trip instead of three, and a single
// statement reads one snapshot anyway. On SQLite it is Read.
func (db *DB) ReadOne(ctx context.Context, fn func(dbtx *DBTx) error) error {
	if db.d != postgresDialect {
		return db.Read(ctx, fn)
	}
	return db.runOne(ctx, fn)
}

// WriteOne runs fn, which makes exactly one statement, durably, like WriteGrouped: its
// outcome is waited for whatever happens to ctx once it started. On PostgreSQL the statement
// commits on its own (one round trip, no BEGIN and COMMIT; PostgreSQL flushes the WAL of
// concurrent commits together); on SQLite it is WriteGrouped, sharing the group's commit.
func (db *DB) WriteOne(ctx context.Context, fn func(dbtx *DBTx) error) error {
	if db.d != postgresDialect {
		return db.WriteGrouped(ctx, fn)
	}
	select {
	case <-db.group.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	return db.runOne(context.WithoutCancel(ctx), fn)
}

// runOne runs fn's one statement on the pool, under the transaction timeout.
func (db *DB) runOne(ctx context.Context, fn func(dbtx *DBTx) error) error {
	began := time.Now()
	t := &DBTx{one: db.write, d: db.d}
	if db.txTimeout > 0 {
		var cancel context.CancelFunc
		t.outer = ctx
		ctx, cancel = context.WithTimeout(ctx, db.txTimeout)
		t.bounded = ctx
		defer cancel()
	}
	defer t.release()
	if err := fn(t); err != nil {
		return db.failed(err)
	}
	db.served(began)
	return nil
}

// runFor is run with the transaction timeout timeout (0: none).
func (db *DB) runFor(ctx context.Context, timeout time.Duration, pool *sql.DB, stmts *stmtCache, opts *sql.TxOptions, fn func(dbtx *DBTx) error) error {
	t := &DBTx{d: db.d, stmts: stmts}
	began := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		t.outer = ctx
		ctx, cancel = context.WithTimeout(ctx, timeout)
		t.bounded = ctx
		defer cancel()
	}
	defer t.release()
	stx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return db.failed(fmt.Errorf("begin: %w", err))
	}
	t.sqlTx = stx
	done := false
	defer func() {
		if done {
			return
		}
		// fn returned an error or panicked: undo its work, then let the panic continue. A
		// connection the server dropped has nothing left to undo.
		if rerr := stx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) && (db.d.unavailable == nil || !db.d.unavailable(rerr)) {
			db.log.Error("store rollback failed", zap.Error(rerr))
		}
	}()
	if err := fn(t); err != nil {
		return db.failed(err)
	}
	done = true
	if err := stx.Commit(); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return db.failed(fmt.Errorf("commit: %w", cerr))
		}
		return db.failed(fmt.Errorf("commit: %w", err))
	}
	db.served(began)
	return nil
}
