package testengine

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPrivatePostgres: a private server keeps its data across a fast and an immediate stop,
// refuses connections while stopped, answers nothing while frozen, and is gone after its
// test.
func TestPrivatePostgres(t *testing.T) {
	var s *PostgresServer
	t.Run("use", func(t *testing.T) {
		s = PrivatePostgres(t)
		ctx := context.Background()
		exec := func(q string) error {
			c, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			conn, err := pgx.Connect(c, s.DSN())
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(c, q)
			return err
		}
		if err := exec("CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"fast", "immediate"} {
			s.Stop(mode)
			if err := exec("SELECT 1"); err == nil {
				t.Fatalf("stopped (%s), the server still answers", mode)
			}
			s.Start()
			if err := exec("INSERT INTO t SELECT x + 1 FROM t"); err != nil {
				t.Fatalf("after a %s stop: %v", mode, err)
			}
		}
		s.Freeze()
		err := exec("SELECT 1")
		s.Thaw()
		if !errors.Is(err, context.DeadlineExceeded) && !pgconnTimeout(err) {
			t.Fatalf("frozen, a query ended with %v, want a timeout", err)
		}
		if err := exec("SELECT 1"); err != nil {
			t.Fatalf("thawed: %v", err)
		}
	})
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server's directory is still there after its test: %v", err)
	}
	if s.running() {
		t.Fatal("the server still runs after its test")
	}
}

func pgconnTimeout(err error) bool {
	var to interface{ Timeout() bool }
	return errors.As(err, &to) && to.Timeout()
}
