package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestRebindDollar(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT ? , ?`, `SELECT $1 , $2`},
		{`WHERE a = ? AND b IN (?, ?)`, `WHERE a = $1 AND b IN ($2, $3)`},
		{`SELECT '?', "a?b", ?`, `SELECT '?', "a?b", $1`},
		{`SELECT 'it''s ?', ?`, `SELECT 'it''s ?', $1`},
		{"SELECT ? -- a ? here\n, ?", "SELECT $1 -- a ? here\n, $2"},
		{`SELECT /* ? */ ?`, `SELECT /* ? */ $1`},
		{`SELECT $$ ? $$, ?`, `SELECT $$ ? $$, $1`},
		{`SELECT $x$ ? $x$, ?`, `SELECT $x$ ? $x$, $1`},
		{`VALUES (CAST(? AS BLOB), CAST(? AS blob))`, `VALUES (CAST($1 AS bytea), CAST($2 AS bytea))`},
		{`SELECT blobs, a_blob, 'BLOB' FROM t`, `SELECT blobs, a_blob, 'BLOB' FROM t`},
		{`SELECT ? || ' (it was ' || state || ')'`, `SELECT $1 || ' (it was ' || state || ')'`},
		{`SELECT 'unterminated ?`, `SELECT 'unterminated ?`},
	} {
		if got := rebindDollar(tc.in); got != tc.want {
			t.Errorf("rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEmbeddedMigrationSets: the migration set of each dialect loads, with contiguous
// versions from 1.
func TestEmbeddedMigrationSets(t *testing.T) {
	for _, d := range []*dialect{sqliteDialect, postgresDialect} {
		migs, err := loadMigrations(d.migrations())
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		if len(migs) == 0 {
			t.Fatalf("%s: no migrations", d.name)
		}
		for i, m := range migs {
			if m.version != i+1 {
				t.Fatalf("%s: migration %d has version %d: versions must be contiguous", d.name, i, m.version)
			}
		}
	}
}

// columns are the columns of every table but schema_migrations, "table.column nullable".
func columns(t *testing.T, db *DB) []string {
	t.Helper()
	q := `SELECT t.name || '.' || c.name || CASE WHEN c."notnull" = 1 OR c.pk > 0 THEN '' ELSE ' null' END
		FROM sqlite_schema t, pragma_table_info(t.name) c WHERE t.type = 'table' AND t.name <> 'schema_migrations'
		AND t.name NOT LIKE 'sqlite_%'`
	if db.d == postgresDialect {
		q = `SELECT table_name || '.' || column_name || CASE WHEN is_nullable = 'YES' THEN ' null' ELSE '' END
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'`
	}
	return queryStrings(t, db, q)
}

// indexes are the names of the indexes a migration created (not those of primary keys).
func indexes(t *testing.T, db *DB) []string {
	t.Helper()
	q := `SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL`
	if db.d == postgresDialect {
		q = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname NOT LIKE '%_pkey'`
	}
	return queryStrings(t, db, q)
}

func queryStrings(t *testing.T, db *DB, q string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			out = append(out, s)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestSchemasMatch: the migrations of both dialects end with the same tables, columns (and
// whether each may be NULL) and indexes. A migration added to one set only fails it.
func TestSchemasMatch(t *testing.T) {
	lite := openBackend(t, sqliteBackend)
	pg := openBackend(t, postgresBackend)
	if a, b := columns(t, lite), columns(t, pg); !slices.Equal(a, b) {
		t.Errorf("columns differ:\nsqlite   %q\npostgres %q", a, b)
	}
	if a, b := indexes(t, lite), indexes(t, pg); !slices.Equal(a, b) {
		t.Errorf("indexes differ:\nsqlite   %q\npostgres %q", a, b)
	}
}

// TestPostgresErrorsHideThePassword: a DSN's password appears in no error: not when the
// server is unreachable, not when the database does not exist, not when the DSN does not
// parse. Nor in the log lines of an Open that succeeds.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	const pw = "Sup3rS3cretPw"
	ctx := context.Background()
	// A port nobody listens on: bind one and close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	real, err := url.Parse(backendConfig(t, postgresBackend).DSN)
	if err != nil {
		t.Fatal(err)
	}
	missing := *real
	missing.User = url.UserPassword("postgres", pw)
	missing.Path = "/w3g_no_such_database"
	for _, tc := range []struct{ name, dsn, want string }{
		{"unreachable url", "postgres://w3g:" + pw + "@" + closed + "/w3g?sslmode=disable", "connect:"},
		{"unreachable pairs", "host=127.0.0.1 port=" + closed[strings.LastIndex(closed, ":")+1:] + " user=w3g password=" + pw + " dbname=w3g sslmode=disable", "connect:"},
		{"no such database", missing.String(), "w3g_no_such_database"},
		{"unparsable", "postgres://w3g:" + pw + "@127.0.0.1:notaport/w3g", "dsn:"},
		{"unparsable pairs", "host=127.0.0.1 password='" + pw, "dsn:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Driver: DriverPostgres, DSN: tc.dsn, ConnectTimeout: 2 * time.Second}
			cfg.SetDefaults()
			db, err := Open(ctx, cfg, Deps{})
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the error quotes the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}

	withPW := *real
	withPW.User = url.UserPassword("postgres", pw) // trust auth: accepted, not checked
	var buf bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(zapcore.AddSync(&buf)), zap.DebugLevel))
	cfg := Config{Driver: DriverPostgres, DSN: withPW.String()}
	cfg.SetDefaults()
	db, err := Open(ctx, cfg, Deps{Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	db.Close()
	if !strings.Contains(buf.String(), "store opened") {
		t.Fatalf("no open line logged: %s", buf.String())
	}
	if strings.Contains(buf.String(), pw) {
		t.Fatalf("the password was logged: %s", buf.String())
	}
}

// TestPostgresStatementTimeout: statementTimeout ends a statement that runs longer.
func TestPostgresStatementTimeout(t *testing.T) {
	cfg := backendConfig(t, postgresBackend)
	cfg.StatementTimeout = 50 * time.Millisecond
	db := openTest(t, cfg, options{})
	ctx := context.Background()
	err := db.Read(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, `SELECT pg_sleep(5)`)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("a 5 s statement under a 50 ms timeout = %v, want the statement timeout", err)
	}
}

// TestReadIsASnapshot: a read transaction sees one state, whatever commits meanwhile.
func TestReadIsASnapshot(t *testing.T) { forEachBackend(t, testReadIsASnapshot) }

func testReadIsASnapshot(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	if err := db.AddAccount(ctx, Account{Address: addrN(1), Owner: "a", Source: SourceDev}); err != nil {
		t.Fatal(err)
	}
	count := func(dbtx *DBTx) int {
		var n int
		if err := dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	err := db.Read(ctx, func(dbtx *DBTx) error {
		before := count(dbtx)
		if err := db.AddAccount(ctx, Account{Address: addrN(2), Owner: "a", Source: SourceDev}); err != nil {
			return err
		}
		if after := count(dbtx); after != before {
			return fmt.Errorf("the read saw %d accounts, then %d", before, after)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLockAccountAcrossHandles: reservations of one account from two DB handles (two
// replicas on one database) at once, each a read-then-write under LockAccount, never take
// the same nonce and skip none; reservations of another account do not wait for them.
func TestLockAccountAcrossHandles(t *testing.T) { forEachBackend(t, testLockAccountAcrossHandles) }

func testLockAccountAcrossHandles(t *testing.T, be backend) {
	ctx := context.Background()
	cfg := backendConfig(t, be)
	dbs := []*DB{openTest(t, cfg, options{}), openTest(t, cfg, options{})}
	accounts := []common.Address{addrN(7), addrN(8)}
	const perHandle = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	got := map[common.Address][]uint64{}
	for _, db := range dbs {
		for i := range perHandle {
			addr := accounts[i%2]
			wg.Go(func() {
				var nonce uint64
				err := db.WriteGrouped(ctx, func(dbtx *DBTx) error {
					if err := dbtx.LockAccount(ctx, 1, addr); err != nil {
						return err
					}
					next, _, err := dbtx.NextNonce(ctx, 1, addr)
					if err != nil {
						return err
					}
					if slot, ok, err := dbtx.ReusableSlot(ctx, 1, addr, 0); err != nil {
						return err
					} else if ok && slot < next {
						return fmt.Errorf("unexpected released slot %d", slot)
					}
					if err := dbtx.RaiseNextNonce(ctx, 1, addr, next+1); err != nil {
						return err
					}
					nonce = next
					return dbtx.InsertTx(ctx, testRecord(1, addr, next))
				})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				got[addr] = append(got[addr], nonce)
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("reservations failed: %v", err)
	}
	for _, addr := range accounts {
		nonces := got[addr]
		slices.Sort(nonces)
		for i, n := range nonces {
			if n != uint64(i) {
				t.Fatalf("nonces of %s = %v, want 0..%d once each", addr.Hex(), nonces, perHandle-1)
			}
		}
	}
}

// TestPostgresTLSConfig: tls.mode replaces the DSN's sslmode, with one attempt per host.
func TestPostgresTLSConfig(t *testing.T) {
	dsn := "postgres://w3g:pw@db1.internal:5432,db2.internal:5433/w3g?sslmode=prefer"
	for _, tc := range []struct {
		mode       string
		tls        bool
		skipVerify bool
		serverName string
	}{
		{"disable", false, false, ""},
		{"require", true, true, ""},
		{"verify-ca", true, true, ""},
		{"verify-full", true, false, "db1.internal"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := Config{Driver: DriverPostgres, DSN: dsn, TLS: TLSConfig{Mode: tc.mode}}
			cfg.SetDefaults()
			cc, err := pgConnConfig(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (cc.TLSConfig != nil) != tc.tls {
				t.Fatalf("TLS config %v, want TLS %v", cc.TLSConfig, tc.tls)
			}
			if tc.tls && (cc.TLSConfig.InsecureSkipVerify != tc.skipVerify || cc.TLSConfig.ServerName != tc.serverName) {
				t.Fatalf("skip verify %v, server name %q", cc.TLSConfig.InsecureSkipVerify, cc.TLSConfig.ServerName)
			}
			if tc.mode == "verify-ca" && cc.TLSConfig.VerifyPeerCertificate == nil {
				t.Fatal("verify-ca verifies no chain")
			}
			// prefer made a TLS and a plain attempt per host: one per host is left.
			if len(cc.Fallbacks) != 1 || cc.Fallbacks[0].Host != "db2.internal" || cc.Fallbacks[0].Port != 5433 ||
				(cc.Fallbacks[0].TLSConfig != nil) != tc.tls {
				t.Fatalf("fallbacks %+v, want db2.internal:5433 alone", cc.Fallbacks)
			}
			if cc.RuntimeParams["statement_timeout"] != "30000" || cc.ConnectTimeout != 5*time.Second {
				t.Fatalf("runtime params %v, connect timeout %v", cc.RuntimeParams, cc.ConnectTimeout)
			}
		})
	}
	cfg := Config{Driver: DriverPostgres, DSN: dsn, TLS: TLSConfig{Mode: "verify-full", CAFile: "/nonexistent/ca.pem"}}
	cfg.SetDefaults()
	if _, err := pgConnConfig(&cfg); err == nil || !strings.Contains(err.Error(), "tls.caFile:") {
		t.Fatalf("a missing caFile = %v, want an error naming tls.caFile", err)
	}
	// Open reports it too, before any connection.
	if _, err := Open(context.Background(), cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "tls.caFile:") {
		t.Fatalf("Open with a missing caFile = %v", err)
	}
}

// TestPostgresTLSConnects: tls.mode overrides the DSN's sslmode (disable in the tests'):
// disable connects in clear; require encrypts when the server serves TLS, and when it does
// not, refuses to connect in clear.
func TestPostgresTLSConnects(t *testing.T) {
	ctx := context.Background()
	cfg := backendConfig(t, postgresBackend)
	cfg.TLS.Mode = "disable"
	db := openTest(t, cfg, options{})
	var serverSSL string
	var ssl bool
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		if err := dbtx.QueryRowContext(ctx, `SHOW ssl`).Scan(&serverSSL); err != nil {
			return err
		}
		return dbtx.QueryRowContext(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl)
	}); err != nil {
		t.Fatal(err)
	}
	if ssl {
		t.Fatal("tls.mode disable: the connection is encrypted")
	}

	cfg.TLS.Mode = "require"
	req, err := Open(ctx, cfg, Deps{})
	if serverSSL != "on" {
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "tls") {
			t.Fatalf("tls.mode require against a server without TLS: %v, want a refusal", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("tls.mode require: %v", err)
	}
	defer req.Close()
	if err := req.Read(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl)
	}); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Fatal("tls.mode require: the connection is not encrypted")
	}
}
