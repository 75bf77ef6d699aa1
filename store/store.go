// Package store is web3gate's SQL persistence: accounts, OAuth clients, nonces and transaction
// records, keys, metadata, products and the owners index. SQLite, in one file, is the embedded
// default; PostgreSQL serves several replicas of web3gate on one database. Repositories are
// written once against DBTx with `?` placeholders, and everything that differs between databases
// (driver, placeholders, how a duplicate key is reported, the migrations directory, locking)
// is one dialect value (dialect.go; SQLite's and its connection settings in sqlite.go,
// PostgreSQL's in postgres.go).
//
// The SQLite driver is modernc.org/sqlite: SQLite translated to Go, so the binary builds with
// CGO_ENABLED=0 and stays static, with no C toolchain in the build or the image.
//
// Concurrency (SQLite; PostgreSQL's is described in postgres.go): SQLite has one writer at a
// time. The DB holds two pools on the same file: a
// write pool of exactly one connection, so our own writers queue in Go (honouring their
// contexts) instead of failing with SQLITE_BUSY, and a read pool of several connections, which
// in WAL mode read a consistent snapshot without waiting for the writer. Write transactions
// start with BEGIN IMMEDIATE, so a second process on the same file (a CLI command next to the
// running server) takes the write lock up front and waits for it under busy_timeout, rather
// than failing on a read-to-write lock upgrade that no timeout can help.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Config is the `store:` section.
type Config struct {
	// Driver is "sqlite" (the default) or "postgres".
	Driver string `yaml:"driver"`

	// SQLite only.
	// Path is the SQLite file, created with its directory when missing.
	Path string `yaml:"path"`
	// BusyTimeout is how long a write waits for another process holding the file's lock.
	BusyTimeout time.Duration `yaml:"busyTimeout"`

	// PostgreSQL only.
	// DSN is the connection string: a postgres:// URL or libpq key=value pairs. Its password
	// never appears in an error or a log line.
	DSN string `yaml:"dsn"`
	// MaxConns is the size of the connection pool, shared by writes and reads.
	MaxConns int `yaml:"maxConns"`
	// ConnectTimeout bounds each connection attempt.
	ConnectTimeout time.Duration `yaml:"connectTimeout"`
	// StatementTimeout is the sessions' statement_timeout: no statement runs longer.
	StatementTimeout time.Duration `yaml:"statementTimeout"`
	// LockTimeout is the sessions' lock_timeout (0: none; statementTimeout still bounds a wait).
	LockTimeout time.Duration `yaml:"lockTimeout"`
	// TransactionTimeout bounds each store transaction, from the wait for a connection to
	// the commit, as web3gate measures it: a server that stopped answering (hung, cut off by
	// the network), where statementTimeout cannot fire, fails the call with "store
	// unavailable" then instead of holding its request.
	TransactionTimeout time.Duration `yaml:"transactionTimeout"`
	// TLS overrides the DSN's sslmode when its mode is set.
	TLS TLSConfig `yaml:"tls"`

	// Migrate is "auto" (the default: Open applies pending migrations) or "never" (Open
	// refuses a database that needs migrations: ErrMigrationsPending; `web3gate store
	// migrate` applies them).
	Migrate string `yaml:"migrate"`
}

// Values of Config.Migrate.
const (
	MigrateAuto  = "auto"
	MigrateNever = "never"
)

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Driver, DriverSQLite)
	defaults.Set(&c.Path, "web3gate.db")
	defaults.Set(&c.BusyTimeout, 5*time.Second)
	defaults.Set(&c.MaxConns, 20)
	defaults.Set(&c.ConnectTimeout, 5*time.Second)
	defaults.Set(&c.StatementTimeout, 30*time.Second)
	defaults.Set(&c.TransactionTimeout, 30*time.Second)
	defaults.Set(&c.Migrate, MigrateAuto)
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	switch c.Driver {
	case DriverSQLite:
		errs = append(errs, c.validateSQLite()...)
	case DriverPostgres:
		errs = append(errs, c.validatePostgres()...)
	default:
		errs = append(errs, fmt.Errorf(`driver: must be "sqlite" or "postgres", got %q`, c.Driver))
	}
	if c.Migrate != MigrateAuto && c.Migrate != MigrateNever {
		errs = append(errs, fmt.Errorf(`migrate: must be "auto" or "never", got %q`, c.Migrate))
	}
	return errors.Join(errs...)
}

func (c *Config) validateSQLite() []error {
	var errs []error
	switch {
	case c.Path == "":
		errs = append(errs, errors.New("path: must not be empty"))
	case c.Path == ":memory:":
		// Accounts, nonces and transaction records must survive a restart; an in-memory
		// database would silently lose them. Tests use a file in a temporary directory.
		errs = append(errs, errors.New("path: an in-memory database is not allowed: state must survive restarts"))
	case strings.HasPrefix(c.Path, "file:"):
		// Open builds the URI itself (escaping the path); a URI here would carry parameters
		// such as mode=memory past this check.
		errs = append(errs, errors.New("path: must be a file path, not a URI"))
	}
	if c.BusyTimeout < time.Millisecond {
		errs = append(errs, errors.New("busyTimeout: must be at least 1ms"))
	}
	return errs
}

func (c *Config) validatePostgres() []error {
	var errs []error
	if strings.TrimSpace(c.DSN) == "" {
		errs = append(errs, errors.New(`dsn: must be set with driver "postgres"`))
	} else if _, err := pgConnConfig(&Config{DSN: c.DSN}); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("maxConns: must be at least 1, got %d", c.MaxConns))
	}
	if c.ConnectTimeout < time.Millisecond {
		errs = append(errs, errors.New("connectTimeout: must be at least 1ms"))
	}
	if c.StatementTimeout < time.Millisecond {
		errs = append(errs, errors.New("statementTimeout: must be at least 1ms"))
	}
	if c.TransactionTimeout < time.Millisecond {
		errs = append(errs, errors.New("transactionTimeout: must be at least 1ms"))
	}
	if c.LockTimeout < 0 {
		errs = append(errs, errors.New("lockTimeout: must not be negative (0: no lock timeout)"))
	}
	return append(errs, c.TLS.validate()...)
}

// Deps are the store's collaborators.
type Deps struct {
	// Logger receives start-up messages (migrations applied); nil discards them.
	Logger *zap.Logger
}

// Errors callers branch on with errors.Is.
var (
	// ErrNotFound: no row with that key.
	ErrNotFound = errors.New("not found")
	// ErrExists: a row with that key exists already.
	ErrExists = errors.New("already exists")
	// ErrSchemaTooNew: the database was migrated by a newer web3gate than this one.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrMigrationsPending: with migrate: never, the database needs migrations.
	ErrMigrationsPending = errors.New("database schema is older than this binary")
)

// DB is an open store.
type DB struct {
	d *dialect
	// SQLite: write is exactly one connection, the single writer, and read the read-only
	// connections (snapshot reads in WAL mode). PostgreSQL: both are the one pool.
	write  *sql.DB
	read   *sql.DB
	target string          // what is open, for messages: the SQLite path, or postgres user@host/db
	pgConf *pgx.ConnConfig // driver postgres: the connections' configuration (TLS included)
	// password is the DSN's, kept only to scrub it from the errors logged (PostgreSQL).
	password string
	// txTimeout bounds each transaction (store.transactionTimeout, PostgreSQL); 0: none.
	txTimeout time.Duration
	avail     availability // outages of the database, each logged once (unavailable.go)
	log       *zap.Logger
	schema    int // schema version after migrations
	// opened is the schema version found at Open, before any migration.
	opened      int
	autoMigrate bool // apply pending migrations (store.migrate: auto)
	group       grouper

	writeStmts, readStmts *stmtCache // prepared statements of each pool
	// listStmts are the product list's statements, prepared on the read pool on first use
	// (products.go).
	listStmts lazyStmts
}

// options are the knobs tests turn; Open uses the defaults.
type options struct {
	migrations  fs.FS  // migration files at the root; nil = the embedded set of the dialect
	synchronous string // PRAGMA synchronous; "" = FULL
}

// Open opens (creating if missing) the database of cfg and applies pending migrations. It
// refuses a database whose schema is newer than this binary knows (ErrSchemaTooNew).
func Open(ctx context.Context, cfg Config, deps Deps) (*DB, error) {
	return open(ctx, cfg, deps, options{})
}

func open(ctx context.Context, cfg Config, deps Deps, o options) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("store: config: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	d := sqliteDialect
	if cfg.Driver == DriverPostgres {
		d = postgresDialect
	}
	if o.migrations == nil {
		o.migrations = d.migrations()
	}
	if o.synchronous == "" {
		o.synchronous = "FULL"
	}
	migs, err := loadMigrations(o.migrations)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db := &DB{d: d, log: log, autoMigrate: cfg.Migrate != MigrateNever, group: grouper{ops: make(chan groupOp, maxGroup), quit: make(chan struct{}), stopped: make(chan struct{})}}
	if d == postgresDialect {
		if err := openPostgres(ctx, cfg, db, migs); err != nil {
			if db.target != "" {
				return nil, fmt.Errorf("store: %s: %w", db.target, err)
			}
			return nil, fmt.Errorf("store: %w", err)
		}
	} else if err := db.openSQLite(ctx, cfg, o, migs); err != nil {
		return nil, err
	}
	if d.prepare {
		db.writeStmts = prepareAll(ctx, db.write, d)
		db.readStmts = prepareAll(ctx, db.read, d)
	}
	if d.groupCommit {
		db.group.wg.Add(1)
		go db.commitLoop()
	} else {
		// Only deferred writes are queued (WriteGrouped writes alone): group.go.
		db.group.wg.Add(laterWorkers)
		for range laterWorkers {
			go db.laterLoop()
		}
	}
	log.Info("store opened", zap.String("driver", cfg.Driver), zap.String("database", db.target),
		zap.Int("schema_version", db.schema))
	return db, nil
}

func (db *DB) openSQLite(ctx context.Context, cfg Config, o options, migs []migration) error {
	d := db.d
	db.target = cfg.Path
	path, err := prepareFile(cfg.Path)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if db.write, err = sql.Open(d.driver, sqliteDSN(path, cfg.BusyTimeout, o.synchronous, true)); err != nil {
		return fmt.Errorf("store: open %s: %w", cfg.Path, err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	db.write.SetConnMaxIdleTime(0)

	if err := db.enableWAL(ctx, cfg.BusyTimeout); err != nil {
		db.write.Close()
		return fmt.Errorf("store: open %s: %w", cfg.Path, err)
	}
	if db.schema, err = db.migrate(ctx, migs); err != nil {
		db.write.Close()
		return fmt.Errorf("store: %s: %w", cfg.Path, err)
	}

	// Readers are opened after the writer has switched the file to WAL and migrated it.
	if db.read, err = sql.Open(d.driver, sqliteDSN(path, cfg.BusyTimeout, o.synchronous, false)); err != nil {
		db.write.Close()
		return fmt.Errorf("store: open %s: %w", cfg.Path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	db.read.SetMaxOpenConns(n)
	db.read.SetMaxIdleConns(n)
	db.read.SetConnMaxLifetime(0)
	db.read.SetConnMaxIdleTime(0)
	if err := db.read.PingContext(ctx); err != nil {
		db.read.Close()
		db.write.Close()
		return fmt.Errorf("store: open %s: %w", cfg.Path, err)
	}
	return nil
}

// prepareFile creates the directory of path and, when the file does not exist yet, the file
// itself with mode 0600: it will hold client secret hashes and account ownership. SQLite gives
// its -wal and -shm files the mode of the database file.
func prepareFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("path %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return "", fmt.Errorf("create directory: %w", err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	return abs, nil
}

// SchemaVersion is the schema version of the open database.
func (db *DB) SchemaVersion() int { return db.schema }

// OpenedAtVersion is the schema version the database had when Open found it, before the
// migrations Open applied.
func (db *DB) OpenedAtVersion() int { return db.opened }

// TransactionTimeout is the bound of each store transaction (store.transactionTimeout), 0
// when there is none (SQLite).
func (db *DB) TransactionTimeout() time.Duration { return db.txTimeout }

// Driver is the database's driver: DriverSQLite or DriverPostgres.
func (db *DB) Driver() string { return db.d.name }

// PostgresConfig is a copy of the configuration the pool's connections are opened with (the
// DSN's settings, timeouts and TLS), for a component that needs a connection of its own (the
// leases); nil on SQLite.
func (db *DB) PostgresConfig() *pgx.ConnConfig {
	if db.pgConf == nil {
		return nil
	}
	return db.pgConf.Copy()
}

// Migrate opens the database of cfg, applies its pending migrations whatever cfg.Migrate
// says, and closes it. It returns the schema versions before and after.
func Migrate(ctx context.Context, cfg Config, deps Deps) (from, to int, err error) {
	cfg.Migrate = MigrateAuto
	db, err := Open(ctx, cfg, deps)
	if err != nil {
		return 0, 0, err
	}
	from, to = db.opened, db.schema
	return from, to, db.Close()
}

// Close closes both pools; transactions in progress fail.
func (db *DB) Close() error {
	db.group.stop.Do(func() { close(db.group.quit) })
	db.group.wg.Wait()
	db.writeStmts.close()
	db.readStmts.close()
	db.listStmts.close()
	var errs []error
	if db.read != nil && db.read != db.write {
		errs = append(errs, db.read.Close())
	}
	errs = append(errs, db.write.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Ping checks that the database answers a query within ctx (for /readyz), as any store call
// does: an unavailable PostgreSQL is ErrUnavailable, its outage logged once.
func (db *DB) Ping(ctx context.Context) error {
	return db.ReadOne(ctx, func(dbtx *DBTx) error {
		var one int
		return dbtx.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	})
}
