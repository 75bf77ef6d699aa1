package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// migration is one file NNNN_name.sql of a migration set.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads the .sql files at the root of fsys, sorted by version. Every .sql file
// must be named NNNN_name.sql with a version from 1 up and no version used twice.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var migs []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations: %s: name must be NNNN_name.sql (lowercase)", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v == 0 {
			return nil, fmt.Errorf("migrations: %s: versions start at 0001", e.Name())
		}
		if other, ok := seen[v]; ok {
			return nil, fmt.Errorf("migrations: %s and %s have the same version", other, e.Name())
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		migs = append(migs, migration{version: v, name: m[2], sql: string(body)})
	}
	slices.SortFunc(migs, func(a, b migration) int { return a.version - b.version })
	return migs, nil
}

// migrate brings the database to the newest version in migs, each migration in its own write
// transaction together with its row in schema_migrations, so a failing migration leaves the
// database at the version before it. It returns the resulting version.
//
// SQLite: because each migration runs inside a transaction, it cannot switch PRAGMA
// foreign_keys; a migration that rebuilds a referenced table uses PRAGMA defer_foreign_keys =
// ON instead. Each transaction takes the write lock and looks at the version again, so
// processes opening one file at once apply each migration once.
func (db *DB) migrate(ctx context.Context, migs []migration) (int, error) {
	return db.migrateWith(ctx, db.write, migs, db.Write)
}

type execQuerier interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// migrateWith is migrate reading the version through q and running each migration with
// write; on PostgreSQL q and write are one connection holding the migration lock
// (migratePostgres).
func (db *DB) migrateWith(ctx context.Context, q execQuerier, migs []migration,
	write func(ctx context.Context, fn func(dbtx *DBTx) error) error) (int, error) {
	known := 0
	if len(migs) > 0 {
		known = migs[len(migs)-1].version
	}
	if !db.autoMigrate {
		// store.migrate: never: look, change nothing.
		current := 0
		var exists bool
		if err := q.QueryRowContext(ctx, db.d.hasMigrationsTable).Scan(&exists); err != nil {
			return 0, fmt.Errorf("read schema version: %w", err)
		}
		if exists {
			var err error
			if current, err = schemaVersion(ctx, q); err != nil {
				return 0, err
			}
		}
		db.opened = current
		switch {
		case current > known:
			return current, fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; run a newer web3gate or restore a backup made for this one",
				ErrSchemaTooNew, current, known)
		case current < known:
			return current, fmt.Errorf("%w: the database is at version %d, this binary needs %d, and store.migrate is never: run `web3gate store migrate` first",
				ErrMigrationsPending, current, known)
		}
		return current, nil
	}
	if _, err := q.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, q)
	if err != nil {
		return 0, err
	}
	db.opened = current
	if current > known {
		return current, fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; run a newer web3gate or restore a backup made for this one",
			ErrSchemaTooNew, current, known)
	}
	for _, m := range migs {
		if m.version <= current {
			continue
		}
		applied := false
		err := write(ctx, func(dbtx *DBTx) error {
			// Another process may have migrated since we looked; the write lock is ours now.
			v, err := schemaVersion(ctx, dbtx)
			if err != nil {
				return err
			}
			if v >= m.version {
				return nil
			}
			// The migration's text as it is: no placeholders, and PostgreSQL bodies in
			// dollar quotes.
			if _, err := dbtx.sqlTx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err = dbtx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, formatTime(time.Now()))
			applied = err == nil
			return err
		})
		if err != nil {
			return current, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
		current = m.version
		if applied {
			db.log.Info("store migration applied", zap.Int("version", m.version), zap.String("name", m.name))
		}
	}
	return current, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}
