package store

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed migrations
var migrationFiles embed.FS

// dialect is everything that differs between SQL databases. Repository code is written once,
// with `?` placeholders, against Tx; a PostgreSQL dialect supplies $n rebinding, its driver,
// its unique-violation code (23505) and its own migrations directory.
type dialect struct {
	name   string
	driver string // database/sql driver name
	// rebind rewrites a query written with `?` placeholders into the dialect's form.
	rebind func(query string) string
	// isUniqueViolation tells a duplicate primary or unique key from other errors.
	isUniqueViolation func(err error) bool
}

// migrations is the embedded migration set of the dialect: migrations/<name>/NNNN_name.sql.
func (d *dialect) migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations/"+d.name)
	if err != nil {
		panic(fmt.Sprintf("store: embedded migrations of %s: %v", d.name, err)) // a build defect
	}
	return sub
}
