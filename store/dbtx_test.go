package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// addrN is a distinct non-zero address per n.
func addrN(n int) common.Address {
	return common.BigToAddress(new(big.Int).SetUint64(uint64(n) + 1))
}

// TestConcurrentWrites: 200 writers at once, each a read-modify-write transaction, with
// readers running beside them. Every one succeeds (no SQLITE_BUSY), and each saw all the
// commits before it: the owners written are exactly 0..199, one each.
func TestConcurrentWrites(t *testing.T) { forEachBackend(t, testConcurrentWrites) }

func testConcurrentWrites(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	const writers = 200
	var wg sync.WaitGroup
	errs := make(chan error, writers+writers/4)
	for i := range writers {
		wg.Go(func() {
			errs <- db.Write(ctx, func(dbtx *DBTx) error {
				// A read-then-write: PostgreSQL's writers run at once and must lock what
				// they decide on (SQLite's single writer needs no lock).
				if err := dbtx.lock(ctx, "test", "accounts"); err != nil {
					return err
				}
				var n int
				if err := dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
					return err
				}
				_, err := dbtx.ExecContext(ctx,
					`INSERT INTO accounts (address, owner, source, created_at) VALUES (?, ?, ?, ?)`,
					addressKey(addrN(i)), strconv.Itoa(n), SourceKeystore, formatTime(time.Now()))
				return err
			})
		})
	}
	for range writers / 4 {
		wg.Go(func() {
			_, err := db.AllAccounts(ctx)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent transaction: %v", err)
		}
	}
	all, err := db.AllAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers {
		t.Fatalf("accounts = %d, want %d", len(all), writers)
	}
	owners := map[string]bool{}
	addrs := map[common.Address]bool{}
	for _, a := range all {
		owners[a.Owner] = true
		addrs[a.Address] = true
	}
	for i := range writers {
		if !owners[strconv.Itoa(i)] {
			t.Errorf("no writer saw %d earlier commits: a lost update", i)
		}
		if !addrs[addrN(i)] {
			t.Errorf("writer %d's account is missing", i)
		}
	}
}

// TestConcurrentWritesTwoHandles: two DBs on one file, as a CLI command beside the running
// server. BEGIN IMMEDIATE and busy_timeout make the second process wait for the lock.
func TestConcurrentWritesTwoHandles(t *testing.T) { forEachBackend(t, testConcurrentWritesTwoHandles) }

func testConcurrentWritesTwoHandles(t *testing.T, be backend) {
	ctx := context.Background()
	cfg := backendConfig(t, be)
	dbs := []*DB{openTest(t, cfg, options{}), openTest(t, cfg, options{})}
	const perHandle = 100
	var wg sync.WaitGroup
	errs := make(chan error, 2*perHandle)
	for h, db := range dbs {
		for i := range perHandle {
			wg.Go(func() {
				errs <- db.AddAccount(ctx, Account{Address: addrN(h*perHandle + i), Owner: "o" + strconv.Itoa(h), Source: SourceDev})
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("write: %v", err)
		}
	}
	for h, db := range dbs {
		got, err := db.AccountsOf(ctx, "o"+strconv.Itoa(1-h))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != perHandle {
			t.Errorf("handle %d sees %d accounts written by the other, want %d", h, len(got), perHandle)
		}
	}
}

func TestWritePanicRollsBack(t *testing.T) { forEachBackend(t, testWritePanicRollsBack) }

func testWritePanicRollsBack(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the panic to continue as boom", p)
			}
		}()
		_ = db.Write(ctx, func(dbtx *DBTx) error {
			if _, err := dbtx.ExecContext(ctx, `INSERT INTO accounts (address, owner, source, created_at) VALUES (?, ?, ?, ?)`,
				addressKey(addrN(1)), "alice", SourceDev, formatTime(time.Now())); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if _, err := db.Account(ctx, addrN(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Account after a panic = %v, want ErrNotFound", err)
	}
	// The single write connection went back to the pool in a usable state.
	if err := db.AddAccount(ctx, Account{Address: addrN(2), Owner: "alice", Source: SourceDev}); err != nil {
		t.Fatalf("write after a panic: %v", err)
	}
}

func TestWriteErrorRollsBack(t *testing.T) { forEachBackend(t, testWriteErrorRollsBack) }

func testWriteErrorRollsBack(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	sentinel := errors.New("changed my mind")
	err := db.Write(ctx, func(dbtx *DBTx) error {
		if _, err := dbtx.ExecContext(ctx, `INSERT INTO accounts (address, owner, source, created_at) VALUES (?, ?, ?, ?)`,
			addressKey(addrN(1)), "alice", SourceDev, formatTime(time.Now())); err != nil {
			return err
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatalf("Write = %v, want fn's error", err)
	}
	if _, err := db.Account(ctx, addrN(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Account after a failed Write = %v, want ErrNotFound", err)
	}
}

func TestWriteCanceledContext(t *testing.T) { forEachBackend(t, testWriteCanceledContext) }

func testWriteCanceledContext(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := db.Write(ctx, func(dbtx *DBTx) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Write with a canceled context = %v (fn called: %v), want context.Canceled before fn", err, called)
	}
}

// TestWriteWaitsForHeldWriterUntilContext: while one Write holds the writer, another waits
// for it and gives up when its context ends.
func TestWriteWaitsForHeldWriterUntilContext(t *testing.T) {
	db := openTest(t, testConfig(t), options{})
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = db.Write(context.Background(), func(dbtx *DBTx) error { close(held); <-release; return nil })
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := db.Write(ctx, func(dbtx *DBTx) error { return nil })
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write behind a held writer = %v, want context.DeadlineExceeded", err)
	}
}

func TestReadRejectsWrites(t *testing.T) { forEachBackend(t, testReadRejectsWrites) }

func testReadRejectsWrites(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	err := db.Read(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, `INSERT INTO accounts (address, owner, source, created_at) VALUES (?, ?, ?, ?)`,
			addressKey(addrN(1)), "alice", SourceDev, formatTime(time.Now()))
		return err
	})
	if err == nil {
		t.Fatal("a write inside Read succeeded")
	}
	if _, err := db.Account(ctx, addrN(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Account = %v, want ErrNotFound", err)
	}
}

// BenchmarkWrite measures small write transactions (one INSERT each), at synchronous=FULL as
// shipped and at NORMAL as the baseline: the ratio is the price of a durable commit.
func BenchmarkWrite(b *testing.B) {
	for _, syncMode := range []string{"FULL", "NORMAL"} {
		for _, parallel := range []bool{false, true} {
			name := fmt.Sprintf("synchronous=%s/parallel=%v", syncMode, parallel)
			b.Run(name, func(b *testing.B) {
				cfg := Config{Path: b.TempDir() + "/bench.db"}
				cfg.SetDefaults()
				db, err := open(context.Background(), cfg, Deps{}, options{synchronous: syncMode})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				ctx := context.Background()
				var mu sync.Mutex
				next := 0
				insert := func() error {
					mu.Lock()
					next++
					n := next
					mu.Unlock()
					return db.Write(ctx, func(dbtx *DBTx) error {
						_, err := dbtx.ExecContext(ctx, `INSERT INTO accounts (address, owner, source, created_at) VALUES (?, ?, ?, ?)`,
							addressKey(addrN(n)), "bench", SourceDev, formatTime(time.Now()))
						return err
					})
				}
				b.ReportAllocs()
				b.ResetTimer()
				if parallel {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := insert(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				} else {
					for b.Loop() {
						if err := insert(); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
			})
		}
	}
}
