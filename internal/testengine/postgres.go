// Package testengine gives tests their own space on the real engines web3gate runs on in
// production: a fresh PostgreSQL database, a Redis key prefix. The engines are found at their
// loopback defaults (127.0.0.1:5432 with trust auth, 127.0.0.1:6379) or where the environment
// says (WEB3GATE_TEST_POSTGRES, WEB3GATE_TEST_REDIS). An engine that cannot be reached fails
// the test loudly: tests never skip for a missing engine. `make test` starts private
// instances on a machine that has none (scripts/test-engines.sh).
package testengine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresAdminDSN is the connection string of the test server's maintenance database, from
// which test databases are created and dropped.
func PostgresAdminDSN() string {
	if s := os.Getenv("WEB3GATE_TEST_POSTGRES"); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// Postgres creates an empty database for t and returns its connection string; the database is
// dropped (its connections terminated) when t ends.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := PostgresAdminDSN()
	name := "w3g_test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testengine: PostgreSQL at %s is not reachable (run the tests through `make test`, which starts one, or set WEB3GATE_TEST_POSTGRES): %v", redact(admin), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testengine: create database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, name) })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("testengine: WEB3GATE_TEST_POSTGRES must be a postgres:// URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func dropDatabase(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Errorf("testengine: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("testengine: drop database %s: %v", name, err)
	}
}

// redact hides a password in a connection URL.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable connection string)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testengine: random: %v", err))
	}
	return hex.EncodeToString(b)
}
