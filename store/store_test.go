package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// testConfig is a valid config for a file in a fresh temporary directory (with a missing
// subdirectory, which Open creates).
func testConfig(t *testing.T) Config {
	t.Helper()
	c := Config{Path: filepath.Join(t.TempDir(), "data", "web3gate.db")}
	c.SetDefaults()
	return c
}

func openTest(t *testing.T, cfg Config, o options) *DB {
	t.Helper()
	db, err := open(context.Background(), cfg, Deps{Logger: zaptest.NewLogger(t)}, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func TestConfigSetDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	want := Config{Driver: "sqlite", Path: "web3gate.db", BusyTimeout: 5 * time.Second,
		MaxConns: 20, ConnectTimeout: 5 * time.Second, StatementTimeout: 30 * time.Second, TransactionTimeout: 30 * time.Second, Migrate: "auto"}
	if c != want {
		t.Fatalf("defaults = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestConfigValidateAccepts(t *testing.T) {
	for _, c := range []Config{
		{Driver: "sqlite", Path: "web3gate.db", BusyTimeout: 5 * time.Second, Migrate: "auto"},
		{Driver: "sqlite", Path: "/var/lib/web3gate/state.db", BusyTimeout: time.Millisecond, Migrate: "never"},
		{Driver: "sqlite", Path: "data dir/with space.db", BusyTimeout: time.Minute, Migrate: "auto"},
		{Driver: "postgres", DSN: "postgres://web3gate:pw@db.internal:5432/web3gate?sslmode=verify-full", MaxConns: 1,
			ConnectTimeout: time.Millisecond, StatementTimeout: time.Millisecond, TransactionTimeout: time.Millisecond, Migrate: "auto"},
		{Driver: "postgres", DSN: "host=db user=w dbname=w password=secret", MaxConns: 50, ConnectTimeout: time.Second,
			StatementTimeout: time.Minute, TransactionTimeout: time.Minute, LockTimeout: time.Second, TLS: TLSConfig{Mode: "verify-ca", CAFile: "/etc/ca.pem",
				CertFile: "/etc/c.pem", KeyFile: "/etc/c.key"}, Migrate: "never"},
		{Driver: "postgres", DSN: "postgres:///w3g", MaxConns: 1, ConnectTimeout: time.Second, StatementTimeout: time.Second,
			TransactionTimeout: time.Second, TLS: TLSConfig{Mode: "disable"}, Migrate: "auto"},
	} {
		t.Run(c.Driver+" "+c.Path+c.DSN, func(t *testing.T) {
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestConfigValidateRejects(t *testing.T) {
	ok := Config{Driver: "sqlite", Path: "web3gate.db", BusyTimeout: 5 * time.Second, Migrate: "auto"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown driver", func(c *Config) { c.Driver = "mysql" }, `driver: must be "sqlite" or "postgres", got "mysql"`},
		{"empty driver", func(c *Config) { c.Driver = "" }, `driver: must be "sqlite" or "postgres", got ""`},
		{"empty path", func(c *Config) { c.Path = "" }, "path: must not be empty"},
		{"memory", func(c *Config) { c.Path = ":memory:" }, "path: an in-memory database is not allowed: state must survive restarts"},
		{"memory uri", func(c *Config) { c.Path = "file:x?mode=memory" }, "path: must be a file path, not a URI"},
		{"uri", func(c *Config) { c.Path = "file:web3gate.db" }, "path: must be a file path, not a URI"},
		{"zero busy timeout", func(c *Config) { c.BusyTimeout = 0 }, "busyTimeout: must be at least 1ms"},
		{"migrate", func(c *Config) { c.Migrate = "sometimes" }, `migrate: must be "auto" or "never", got "sometimes"`},
		{"negative busy timeout", func(c *Config) { c.BusyTimeout = -time.Second }, "busyTimeout: must be at least 1ms"},
		{"two at once", func(c *Config) { c.Path = ""; c.BusyTimeout = 0 },
			"path: must not be empty\nbusyTimeout: must be at least 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidateRejectsPostgres(t *testing.T) {
	ok := Config{Driver: "postgres", DSN: "postgres://w3g@127.0.0.1/w3g", MaxConns: 20, ConnectTimeout: 5 * time.Second,
		StatementTimeout: 30 * time.Second, TransactionTimeout: 30 * time.Second, Migrate: "auto"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("base config: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no dsn", func(c *Config) { c.DSN = "" }, `dsn: must be set with driver "postgres"`},
		{"blank dsn", func(c *Config) { c.DSN = "  " }, `dsn: must be set with driver "postgres"`},
		{"bad url", func(c *Config) { c.DSN = "postgres://u:hunter2@host:notaport/db" }, errDSN.Error()},
		{"bad pairs", func(c *Config) { c.DSN = "host=h password='hunter2" }, errDSN.Error()},
		{"bad sslmode", func(c *Config) { c.DSN = "postgres://u:hunter2@h/db?sslmode=sometimes" }, errDSN.Error()},
		{"zero conns", func(c *Config) { c.MaxConns = 0 }, "maxConns: must be at least 1, got 0"},
		{"zero connect timeout", func(c *Config) { c.ConnectTimeout = 0 }, "connectTimeout: must be at least 1ms"},
		{"zero statement timeout", func(c *Config) { c.StatementTimeout = 0 }, "statementTimeout: must be at least 1ms"},
		{"zero transaction timeout", func(c *Config) { c.TransactionTimeout = 0 }, "transactionTimeout: must be at least 1ms"},
		{"negative lock timeout", func(c *Config) { c.LockTimeout = -time.Second }, "lockTimeout: must not be negative (0: no lock timeout)"},
		{"tls mode", func(c *Config) { c.TLS.Mode = "prefer" },
			`tls.mode: must be "disable", "require", "verify-ca" or "verify-full", got "prefer"`},
		{"tls files without mode", func(c *Config) { c.TLS.CAFile = "/ca.pem" },
			"tls.mode: must be set when tls.caFile, tls.certFile or tls.keyFile is"},
		{"tls disable with files", func(c *Config) { c.TLS = TLSConfig{Mode: "disable", CAFile: "/ca.pem"} },
			`tls.mode: "disable" takes no caFile, certFile or keyFile`},
		{"tls cert without key", func(c *Config) { c.TLS = TLSConfig{Mode: "require", CertFile: "/c.pem"} },
			"tls.certFile, tls.keyFile: give both or neither"},
		{"two at once", func(c *Config) { c.MaxConns = -1; c.StatementTimeout = 0 },
			"maxConns: must be at least 1, got -1\nstatementTimeout: must be at least 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error quotes the DSN's password: %v", err)
			}
		})
	}
}

func TestOpenRejectsInvalidConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.Path = ":memory:"
	if _, err := Open(context.Background(), cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "in-memory") {
		t.Fatalf("Open(:memory:) = %v, want the in-memory refusal", err)
	}
}

func TestOpenPathWithURICharacters(t *testing.T) {
	// '?', '#' and '%' in a path are file name characters, not URI syntax.
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Path = filepath.Join(t.TempDir(), "we?ird #dir%20", "state.db")
	db := openTest(t, cfg, options{})
	if err := db.AddAccount(ctx, Account{Address: addrN(1), Owner: "alice", Source: SourceDev}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.Path); err != nil {
		t.Fatalf("database not at the configured path: %v", err)
	}
}

func TestOpenRejectsNonDatabaseFile(t *testing.T) {
	cfg := testConfig(t)
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Path, []byte(strings.Repeat("not sqlite ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), cfg, Deps{})
	if err == nil || !strings.Contains(err.Error(), "not a database") {
		t.Fatalf("Open of a non-database file = %v, want an error saying so", err)
	}
}

func TestOpenMigrateReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	db, err := Open(ctx, cfg, Deps{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if v, want := db.SchemaVersion(), embeddedVersion(t); v != want {
		t.Fatalf("schema version = %d, want %d", v, want)
	}
	acct := Account{Address: common.HexToAddress("0x00000000000000000000000000000000000000a1"), Owner: "alice",
		Source: SourceKeystore, CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)}
	if err := db.AddAccount(ctx, acct); err != nil {
		t.Fatalf("AddAccount: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	fi, err := os.Stat(cfg.Path)
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v, want 0600", fi.Mode().Perm())
	}

	db, err = Open(ctx, cfg, Deps{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if v, want := db.SchemaVersion(), embeddedVersion(t); v != want {
		t.Fatalf("schema version after reopen = %d, want %d", v, want)
	}
	got, err := db.Account(ctx, acct.Address)
	if err != nil {
		t.Fatalf("Account after reopen: %v", err)
	}
	if got.Address != acct.Address || got.Owner != acct.Owner || got.Source != acct.Source || !got.CreatedAt.Equal(acct.CreatedAt) {
		t.Fatalf("Account after reopen = %+v, want %+v", got, acct)
	}
	var n int
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if want := embeddedVersion(t); n != want {
		t.Fatalf("schema_migrations rows = %d, want %d (a reopen applies nothing twice)", n, want)
	}
}

func TestOpenSetsPragmas(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, testConfig(t), options{})
	for _, pool := range []struct {
		name string
		run  func(context.Context, func(*DBTx) error) error
	}{{"write", db.Write}, {"read", db.Read}} {
		t.Run(pool.name, func(t *testing.T) {
			var mode string
			var fk, sync, busy int
			err := pool.run(ctx, func(dbtx *DBTx) error {
				if err := dbtx.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
					return err
				}
				if err := dbtx.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
					return err
				}
				if err := dbtx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
					return err
				}
				return dbtx.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
			})
			if err != nil {
				t.Fatal(err)
			}
			if mode != "wal" || fk != 1 || sync != 2 || busy != 5000 {
				t.Fatalf("journal_mode=%s foreign_keys=%d synchronous=%d busy_timeout=%d, want wal 1 2 (FULL) 5000",
					mode, fk, sync, busy)
			}
		})
	}
}

// migrationSet is a migration source for tests: file name → SQL.
func migrationSet(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, body := range files {
		m[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}

func TestOpenRefusesNewerSchema(t *testing.T) { forEachBackend(t, testOpenRefusesNewerSchema) }

func testOpenRefusesNewerSchema(t *testing.T, be backend) {
	ctx := context.Background()
	cfg := backendConfig(t, be)
	first := "0001_accounts_clients.sql"
	if be == postgresBackend {
		first = "0001_initial.sql"
	}
	real := migrationSet(map[string]string{first: readEmbedded(t, be, first)})
	future := migrationSet(map[string]string{
		first:             readEmbedded(t, be, first),
		"0002_future.sql": `CREATE TABLE future (x INTEGER);`,
	})
	db, err := open(ctx, cfg, Deps{}, options{migrations: future})
	if err != nil {
		t.Fatalf("open with the future set: %v", err)
	}
	db.Close()

	_, err = open(ctx, cfg, Deps{}, options{migrations: real})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("open with an older binary = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "version 2, this binary knows up to 1") {
		t.Fatalf("error %q does not name both versions", err)
	}

	// The refusal changed nothing: the newer binary still opens it at its version.
	db = openTest(t, cfg, options{migrations: future})
	if v := db.SchemaVersion(); v != 2 {
		t.Fatalf("schema version = %d, want 2", v)
	}
}

func TestBrokenMigrationLeavesPreviousVersion(t *testing.T) {
	forEachBackend(t, testBrokenMigrationLeavesPreviousVersion)
}

func testBrokenMigrationLeavesPreviousVersion(t *testing.T, be backend) {
	ctx := context.Background()
	cfg := backendConfig(t, be)
	first := `CREATE TABLE a (x INTEGER NOT NULL); INSERT INTO a VALUES (1);`
	// The first statement of 0002 succeeds, the second fails: both must be undone.
	broken := migrationSet(map[string]string{
		"0001_a.sql": first,
		"0002_b.sql": `CREATE TABLE b (y INTEGER); INSERT INTO b VALUES (1); INSERT INTO missing VALUES (1);`,
		"0003_c.sql": `CREATE TABLE c (z INTEGER);`,
	})
	_, err := open(ctx, cfg, Deps{}, options{migrations: broken})
	if err == nil || !strings.Contains(err.Error(), "migration 0002_b") {
		t.Fatalf("open with a broken migration = %v, want an error naming 0002_b", err)
	}

	db := openTest(t, cfg, options{migrations: migrationSet(map[string]string{"0001_a.sql": first})})
	if v := db.SchemaVersion(); v != 1 {
		t.Fatalf("schema version = %d, want 1", v)
	}
	tables := tableNames(t, db)
	if want := "a schema_migrations"; tables != want {
		t.Fatalf("tables = %q, want %q (nothing of 0002 or 0003)", tables, want)
	}
	db.Close()

	fixed := migrationSet(map[string]string{
		"0001_a.sql": first,
		"0002_b.sql": `CREATE TABLE b (y INTEGER); INSERT INTO b VALUES (1);`,
		"0003_c.sql": `CREATE TABLE c (z INTEGER);`,
	})
	db = openTest(t, cfg, options{migrations: fixed})
	if v := db.SchemaVersion(); v != 3 {
		t.Fatalf("schema version after the fix = %d, want 3", v)
	}
	if got, want := tableNames(t, db), "a b c schema_migrations"; got != want {
		t.Fatalf("tables = %q, want %q", got, want)
	}
}

func TestLoadMigrationsRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no number", map[string]string{"init.sql": ""}, "migrations: init.sql: name must be NNNN_name.sql (lowercase)"},
		{"short number", map[string]string{"1_init.sql": ""}, "migrations: 1_init.sql: name must be NNNN_name.sql (lowercase)"},
		{"upper case", map[string]string{"0001_Init.sql": ""}, "migrations: 0001_Init.sql: name must be NNNN_name.sql (lowercase)"},
		{"version zero", map[string]string{"0000_init.sql": ""}, "migrations: 0000_init.sql: versions start at 0001"},
		{"duplicate", map[string]string{"0001_a.sql": "", "0001_b.sql": ""}, "migrations: 0001_a.sql and 0001_b.sql have the same version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadMigrations(migrationSet(tc.files))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("loadMigrations = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEmbeddedSQLiteMigrations(t *testing.T) {
	migs, err := loadMigrations(sqliteDialect.migrations())
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) == 0 || migs[0].version != 1 || migs[0].name != "accounts_clients" {
		t.Fatalf("embedded migrations = %+v, want 0001_accounts_clients first", migs)
	}
	for i, m := range migs {
		if m.version != i+1 {
			t.Fatalf("migration %d has version %d: versions must be contiguous", i, m.version)
		}
	}
}

func TestOpenLogsNoSecrets(t *testing.T) { forEachBackend(t, testOpenLogsNoSecrets) }

func testOpenLogsNoSecrets(t *testing.T, be backend) {
	// Open logs its path and version; a client's secret hash never reaches a log line.
	ctx := context.Background()
	var buf bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(zapcore.AddSync(&buf)), zap.DebugLevel))
	db, err := Open(ctx, backendConfig(t, be), Deps{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := Client{ID: "c1", SecretHash: "$argon2id$v=19$SECRETHASH", Principal: "alice", Scopes: []string{"eth_sign"}}
	if err := db.AddClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	log.Info("client added", zap.Object("client", c), zap.Stringer("as_string", c))
	joined := buf.String()
	if !strings.Contains(joined, "store opened") || !strings.Contains(joined, "client added") {
		t.Fatalf("log lines missing: %s", joined)
	}
	if strings.Contains(joined, "SECRETHASH") {
		t.Fatalf("secret hash logged: %s", joined)
	}
}

func readEmbedded(t *testing.T, be backend, name string) string {
	t.Helper()
	b, err := migrationFiles.ReadFile("migrations/" + string(be) + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tableNames(t *testing.T, db *DB) string {
	t.Helper()
	ctx := context.Background()
	var names []string
	err := db.Read(ctx, func(dbtx *DBTx) error {
		q := `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`
		if db.d == postgresDialect {
			q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
		}
		rows, err := dbtx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			names = append(names, n)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, " ")
}

// TestConcurrentOpenMigratesOnce: several processes starting at once on a new file (here,
// several DBs) all open it, and each migration is applied exactly once.
func TestConcurrentOpenMigratesOnce(t *testing.T) { forEachBackend(t, testConcurrentOpenMigratesOnce) }

func testConcurrentOpenMigratesOnce(t *testing.T, be backend) {
	ctx := context.Background()
	cfg := backendConfig(t, be)
	const n = 4
	dbs := make([]*DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = Open(ctx, cfg, Deps{}) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
		defer dbs[i].Close()
	}
	var rows int
	if err := dbs[0].Read(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows)
	}); err != nil {
		t.Fatal(err)
	}
	want := embeddedVersion(t)
	if be == postgresBackend {
		migs, _ := loadMigrations(postgresDialect.migrations())
		want = len(migs)
	}
	if rows != want {
		t.Fatalf("schema_migrations rows = %d, want %d (one per migration)", rows, want)
	}
	for i := range n {
		if v := dbs[i].SchemaVersion(); v != want {
			t.Fatalf("Open %d: schema version %d, want %d", i, v, want)
		}
	}
}

// embeddedVersion is the newest version of the embedded SQLite migrations.
func embeddedVersion(t *testing.T) int {
	t.Helper()
	migs, err := loadMigrations(sqliteDialect.migrations())
	if err != nil || len(migs) == 0 {
		t.Fatalf("embedded migrations: %v", err)
	}
	return migs[len(migs)-1].version
}

// TestMigrateNever: with store.migrate never, Open refuses a database that needs migrations
// and changes nothing; Migrate applies them; then Open accepts it.
func TestMigrateNever(t *testing.T) { forEachBackend(t, testMigrateNever) }

func testMigrateNever(t *testing.T, be backend) {
	ctx := context.Background()
	cfg := backendConfig(t, be)
	cfg.Migrate = MigrateNever
	migs, err := loadMigrations(map[backend]*dialect{sqliteBackend: sqliteDialect, postgresBackend: postgresDialect}[be].migrations())
	if err != nil {
		t.Fatal(err)
	}
	latest := migs[len(migs)-1].version

	_, err = Open(ctx, cfg, Deps{})
	if !errors.Is(err, ErrMigrationsPending) || !strings.Contains(err.Error(), "run `web3gate store migrate`") ||
		!strings.Contains(err.Error(), fmt.Sprintf("version 0, this binary needs %d", latest)) {
		t.Fatalf("Open of an empty database with migrate never = %v, want ErrMigrationsPending naming the command", err)
	}
	auto := cfg
	auto.Migrate = MigrateAuto
	if tables := tableNames(t, openTest(t, auto, options{migrations: migrationSet(nil)})); tables != "schema_migrations" {
		t.Fatalf("the refused Open created tables: %q", tables)
	}

	from, to, err := Migrate(ctx, cfg, Deps{})
	if err != nil || from != 0 || to != latest {
		t.Fatalf("Migrate = %d, %d, %v, want 0, %d", from, to, err, latest)
	}
	db := openTest(t, cfg, options{})
	if db.SchemaVersion() != latest || db.OpenedAtVersion() != latest {
		t.Fatalf("after Migrate: version %d (opened at %d), want %d", db.SchemaVersion(), db.OpenedAtVersion(), latest)
	}
	if from, to, err := Migrate(ctx, cfg, Deps{}); err != nil || from != latest || to != latest {
		t.Fatalf("Migrate again = %d, %d, %v, want nothing to do", from, to, err)
	}
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of q with args: the detail of each step.
func queryPlan(t *testing.T, db *DB, q string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return plan
}
