package store

import (
	"testing"

	"github.com/web3gate/web3gate/internal/testengine"
)

// The store's tests run on both backends: SQLite in a file of a temporary directory, and
// PostgreSQL in a database of its own (internal/testengine), dropped when the test ends.

type backend string

const (
	sqliteBackend   backend = DriverSQLite
	postgresBackend backend = DriverPostgres
)

var backends = []backend{sqliteBackend, postgresBackend}

// backendConfig is a valid config of a fresh, empty database of be.
func backendConfig(t *testing.T, be backend) Config {
	t.Helper()
	if be == postgresBackend {
		c := Config{Driver: DriverPostgres, DSN: testengine.Postgres(t)}
		c.SetDefaults()
		return c
	}
	return testConfig(t)
}

// openBackend opens a fresh database of be, closed when the test ends.
func openBackend(t *testing.T, be backend) *DB {
	t.Helper()
	return openTest(t, backendConfig(t, be), options{})
}

// forEachBackend runs test once per backend, as subtests named after them.
func forEachBackend(t *testing.T, test func(t *testing.T, be backend)) {
	t.Helper()
	for _, be := range backends {
		t.Run(string(be), func(t *testing.T) { test(t, be) })
	}
}
