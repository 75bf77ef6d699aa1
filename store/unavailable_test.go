package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// TestUnavailable: on a private PostgreSQL that is stopped, started again and frozen, store
// calls fail with ErrUnavailable (its wire form -32002 "store unavailable", no driver words,
// no password), within transactionTimeout when the server does not answer at all; the same
// DB serves again once the server is back; each outage is logged once with its end, and a
// statement the server refuses is not an outage.
func TestUnavailable(t *testing.T) {
	pg := testengine.PrivatePostgres(t)
	const password = "pw-not-in-any-message" // trust auth: accepted and ignored
	cfg := Config{Driver: DriverPostgres, DSN: strings.Replace(pg.DSN(), "postgres@", "postgres:"+password+"@", 1),
		MaxConns: 4, TransactionTimeout: time.Second}
	cfg.SetDefaults()
	core, logs := observer.New(zap.InfoLevel)
	db, err := Open(context.Background(), cfg, Deps{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	write := func(name string) error {
		return db.Write(ctx, func(dbtx *DBTx) error {
			return dbtx.RecordChainGenesis(ctx, 7, common.HexToHash(name))
		})
	}
	read := func() error {
		return db.Read(ctx, func(dbtx *DBTx) error {
			_, _, err := dbtx.ChainGenesis(ctx, 7)
			return err
		})
	}
	checkUnavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: %v, want ErrUnavailable", what, err)
		}
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je != jsonrpc.ErrStoreUnavailable {
			t.Fatalf("%s: the wire form is %v, want jsonrpc.ErrStoreUnavailable", what, je)
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("%s: the password is in the error", what)
		}
	}
	if err := write("0xaa"); err != nil {
		t.Fatal(err)
	}

	// A refusal of the statement itself is no outage.
	err = db.Write(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, `SELECT 1/0`)
		return err
	})
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("division by zero: %v, want an error that is not ErrUnavailable", err)
	}

	for _, mode := range []string{"fast", "immediate"} {
		pg.Stop(mode)
		checkUnavailable("write, stopped "+mode, write("0xbb"))
		checkUnavailable("read, stopped "+mode, read())
		pg.Start()
		time.Sleep(outageSettle) // a call begun within outageSettle of the failure does not end the outage
		// The pool's connections died with the server: the calls after it find new ones.
		var errs []error
		for range 3 {
			errs = append(errs, read())
		}
		if err := write("0xcc"); err != nil || errors.Join(errs...) != nil {
			t.Fatalf("after the restart (%s): write %v, reads %v", mode, err, errs)
		}
	}

	// A frozen server answers nothing: the calls end with transactionTimeout.
	pg.Freeze()
	done := make(chan [2]error, 1)
	go func() { done <- [2]error{write("0xdd"), read()} }()
	select {
	case errs := <-done:
		pg.Thaw()
		checkUnavailable("write, frozen", errs[0])
		checkUnavailable("read, frozen", errs[1])
	case <-time.After(30 * time.Second):
		pg.Thaw()
		t.Fatal("calls to a frozen server did not end within 30s (transactionTimeout is 1s)")
	}
	time.Sleep(outageSettle)
	if err := read(); err != nil {
		t.Fatalf("thawed: %v", err)
	}

	down := logs.FilterMessageSnippet("store unavailable").All()
	up := logs.FilterMessage("store available again").All()
	if len(down) != 3 || len(up) != 3 {
		t.Fatalf("logged %d outages and %d ends, want 3 of each", len(down), len(up))
	}
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if strings.Contains(f.String, password) || f.Interface != nil && strings.Contains(fmtAny(f.Interface), password) {
				t.Fatalf("the password is in the log line %q", e.Message)
			}
		}
	}
}

func fmtAny(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	return ""
}
