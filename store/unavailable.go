package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// When PostgreSQL cannot serve a store call (stopped, restarting, unreachable, out of
// connections, or not answering within store.transactionTimeout), the call fails at once with
// an error matching ErrUnavailable, whatever repository it came from: it carries its wire
// form, jsonrpc.ErrStoreUnavailable (-32002 "store unavailable", HTTP 503), so that every
// route answers it the same without mapping it itself, and it never shows the database's
// own words (host names, user) to a client. The process logs the first failure of an outage
// with its cause, and the first success after it; the connection pool replaces the broken
// connections by itself, so requests succeed again as soon as the database answers, without a
// restart. A write whose commit failed this way may or may not have been committed: callers
// treat it as they treat a crash (the confirmer finishes a nonce reservation that did commit).
//
// SQLite's errors are not classified: one file on a local disk is not "unavailable", and its
// failures stay internal errors.

// ErrUnavailable matches (errors.Is) the error of a store call the database could not serve.
var ErrUnavailable = errors.New("store unavailable")

// unavailableError is a store call's failure classified as the database being unavailable.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return "store unavailable: " + e.cause.Error() }

// Unwrap gives the driver's error, for logs and errors.As on it.
func (e *unavailableError) Unwrap() error { return e.cause }

// Is makes errors.Is(err, ErrUnavailable) hold.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// As gives the error's wire form to errors.As(err, **jsonrpc.Error): the one error writer of
// the JSON-RPC and REST routes answers -32002 / 503 without knowing the store.
func (e *unavailableError) As(target any) bool {
	if p, ok := target.(**jsonrpc.Error); ok {
		*p = jsonrpc.ErrStoreUnavailable
		return true
	}
	return false
}

// pgUnavailable reports whether err means the PostgreSQL server cannot serve now, rather than
// a refusal of the statement itself (a constraint, bad data, a bug).
func pgUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up (a lost lease, a shutdown)
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", // admin_shutdown: the server stops (fast) or the session was terminated
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now: starting up, shutting down, in recovery
			"53300", // too_many_connections
			"57014", // query_canceled: statement_timeout
			"55P03", // lock_not_available: lock_timeout
			"25P03": // idle_in_transaction_session_timeout
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	return false
}

// availability follows the outages of the database, to log each once: since is the unix
// nanoseconds of the current outage's first failure, 0 while the database serves.
type availability struct {
	since atomic.Int64
}

// failed classifies err (a store call's failure): when it means the database is unavailable
// it is returned as an unavailableError, and the first such failure of an outage is logged.
// Anything else is returned as it is.
func (db *DB) failed(err error) error {
	if err == nil || db.d.unavailable == nil || errors.Is(err, ErrUnavailable) || !db.d.unavailable(err) {
		return err
	}
	if db.avail.since.Load() == 0 && db.avail.since.CompareAndSwap(0, time.Now().UnixNano()) {
		db.log.Warn("store unavailable: calls that need the database fail with \"store unavailable\" until it answers again",
			zap.String("database", db.target), zap.Error(scrubPassword(err, db.password)))
	}
	return &unavailableError{cause: err}
}

// outageSettle is how long after an outage's first failure a call must have begun for its
// success to end the outage: a server going down ends its sessions one by one, and a call
// begun meanwhile on a session not ended yet still succeeds.
const outageSettle = time.Second

// served records a store call begun at began that the database served: one begun at least
// outageSettle after the outage's first failure ends it (logged).
func (db *DB) served(began time.Time) {
	since := db.avail.since.Load()
	if since != 0 && began.UnixNano()-since >= int64(outageSettle) && db.avail.since.CompareAndSwap(since, 0) {
		db.log.Info("store available again", zap.String("database", db.target),
			zap.Duration("unavailable_for", time.Since(time.Unix(0, since))))
	}
}
