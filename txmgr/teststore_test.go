package txmgr

import (
	"os"
	"sync"
	"testing"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// testStoreDSNs are the PostgreSQL databases of the store paths of the tests.
var testStoreDSNs sync.Map

// testStoreConfig is the store of a test at path: the SQLite file, or, with
// WEB3GATE_TEST_STORE=postgres, a PostgreSQL database of path's own (two opens of one path
// share it, as replicas share a database).
func testStoreConfig(t testing.TB, path string) store.Config {
	t.Helper()
	c := store.Config{Path: path}
	switch be := os.Getenv("WEB3GATE_TEST_STORE"); be {
	case "", store.DriverSQLite:
	case store.DriverPostgres:
		dsn, ok := testStoreDSNs.Load(path)
		if !ok {
			dsn = testengine.Postgres(t)
			testStoreDSNs.Store(path, dsn)
		}
		c.Driver, c.DSN = store.DriverPostgres, dsn.(string)
	default:
		t.Fatalf("WEB3GATE_TEST_STORE=%q: must be sqlite or postgres", be)
	}
	c.SetDefaults()
	return c
}
