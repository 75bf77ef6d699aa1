package store

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed migrations
var migrationFiles embed.FS

// dialect is everything that differs between SQL databases. Repository code is written once,
// with `?` placeholders, against DBTx; each dialect supplies its placeholder rebinding, its
// driver, how it reports a unique violation and its own migrations directory, and the few
// behaviours below that repositories read instead of testing the database's name.
type dialect struct {
	name   string
	driver string // database/sql driver name
	// rebind rewrites a query written with `?` placeholders into the dialect's form.
	rebind func(query string) string
	// isUniqueViolation tells a duplicate primary or unique key from other errors.
	isUniqueViolation func(err error) bool
	// prepare: the registered queries are prepared once per pool at Open (SQLite parses a
	// small statement slower than it runs it). PostgreSQL's driver prepares and caches every
	// statement per connection by itself.
	prepare bool
	// noIndex is put before a column in a WHERE term to keep SQLite's planner from using an
	// index on it (its unary +); empty where the planner needs no such hint.
	noIndex string
	// lockQuery takes a lock until the end of the transaction on the int64 key given as its
	// one argument; empty where one writer at a time holds the whole database (SQLite).
	lockQuery string
	// hasMigrationsTable is a query answering whether schema_migrations exists (a boolean).
	hasMigrationsTable string
	// groupCommit: WriteGrouped shares transactions between callers. Without it each call is
	// a transaction of its own (see group.go for why PostgreSQL does not group).
	groupCommit bool
	// unavailable tells a failure of the database to serve (down, unreachable, too slow)
	// from a refusal of the statement (unavailable.go); nil: no failure is classified so.
	unavailable func(err error) bool
}

// migrations is the embedded migration set of the dialect: migrations/<name>/NNNN_name.sql.
func (d *dialect) migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations/"+d.name)
	if err != nil {
		panic(fmt.Sprintf("store: embedded migrations of %s: %v", d.name, err)) // a build defect
	}
	return sub
}
