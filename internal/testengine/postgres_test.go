package testengine

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPostgres: the database exists while the test runs and is gone after.
func TestPostgres(t *testing.T) {
	var dsn string
	t.Run("use", func(t *testing.T) {
		dsn = Postgres(t)
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "CREATE TABLE t (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err == nil {
		conn.Close(context.Background())
		t.Fatalf("database %s still exists after its test", dsn)
	}
}
