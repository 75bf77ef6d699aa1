package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var sqliteDialect = &dialect{
	name:               "sqlite",
	driver:             "sqlite", // registered by modernc.org/sqlite
	rebind:             func(q string) string { return q },
	prepare:            true,
	noIndex:            "+",
	groupCommit:        true,
	hasMigrationsTable: `SELECT COUNT(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`,
	isUniqueViolation: func(err error) bool {
		var e *sqlite.Error
		if !errors.As(err, &e) {
			return false
		}
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return true
		}
		return false
	},
}

// sqliteDSN is the data source name of one pool. Every connection sets busy_timeout,
// foreign_keys and synchronous (they are per connection). The write pool begins its
// transactions IMMEDIATE; the read pool is query-only, so a write through Read fails instead of
// contending with the writer. WAL is switched on by enableWAL, not here: the switch can fail
// with SQLITE_BUSY without waiting (see there).
func sqliteDSN(absPath string, busy time.Duration, synchronous string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+synchronous+")")
	if write {
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	// A file: URI with the path escaped, so a '?' or '#' in a file name is not read as the
	// start of the parameters.
	u := url.URL{Scheme: "file", Path: absPath, RawQuery: q.Encode()}
	return u.String()
}

// enableWAL switches the file to WAL mode (a persistent setting) and confirms it: SQLite
// leaves the mode unchanged, without an error, where WAL is impossible (some network file
// systems). Switching needs an exclusive lock, and SQLite answers SQLITE_BUSY at once rather
// than calling the busy handler when another connection is doing the same, as happens when
// two processes start on a new file; so the switch is retried here for up to busy.
func (db *DB) enableWAL(ctx context.Context, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for {
		var mode string
		err := db.write.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("journal mode is %q, want wal (is the file on a local file system?)", mode)
			}
			return nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			return fmt.Errorf("enable WAL: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("enable WAL: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// isBusy reports SQLITE_BUSY, with any extended code.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}
