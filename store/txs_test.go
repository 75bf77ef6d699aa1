package store

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testengine"
)

func testRecord(chain uint64, addr common.Address, nonce uint64) *TxRecord {
	return &TxRecord{ChainID: chain, Address: addr, Nonce: nonce, Principal: "p", Kind: KindSend,
		State: StateReserved, Fields: []byte(`{}`), MaxCost: big.NewInt(int64(nonce) + 1)}
}

// TestGroupedWritesShareCommits: 300 concurrent grouped read-modify-write functions (nonce
// reservations of one account, each under LockAccount) each see the ones before them: no
// nonce is handed out twice, none is skipped; a failing function undoes only its own writes.
// On SQLite they share commits; on PostgreSQL each is its own transaction and LockAccount
// serializes them.
func TestGroupedWritesShareCommits(t *testing.T) { forEachBackend(t, testGroupedWritesShareCommits) }

func testGroupedWritesShareCommits(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(1)
	const n = 300
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = db.WriteGrouped(ctx, func(dbtx *DBTx) error {
				if err := dbtx.LockAccount(ctx, 1, addr); err != nil {
					return err
				}
				next, _, err := dbtx.NextNonce(ctx, 1, addr)
				if err != nil {
					return err
				}
				if err := dbtx.RaiseNextNonce(ctx, 1, addr, next+1); err != nil {
					return err
				}
				if err := dbtx.InsertTx(ctx, testRecord(1, addr, next)); err != nil {
					return err
				}
				if i%10 == 0 {
					return errors.New("refused") // undoes this function's two writes
				}
				return nil
			})
		})
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			if err.Error() != "refused" {
				t.Fatalf("grouped write: %v", err)
			}
			failed++
		}
	}
	err := db.Read(ctx, func(dbtx *DBTx) error {
		next, ok, err := dbtx.NextNonce(ctx, 1, addr)
		if err != nil || !ok || next != uint64(n-failed) {
			t.Errorf("next nonce %d %v %v, want %d", next, ok, err, n-failed)
		}
		count, sum, err := dbtx.InFlight(ctx, 1, addr)
		want := (n - failed) * (n - failed + 1) / 2 // costs nonce+1 for nonces 0..n-failed-1
		if err != nil || count != n-failed || sum.Int64() != int64(want) {
			t.Errorf("in flight %d rows costing %v (%v), want %d costing %d", count, sum, err, n-failed, want)
		}
		max, has, err := dbtx.MaxStoredNonce(ctx, 1, addr)
		if err != nil || !has || max != uint64(n-failed-1) {
			t.Errorf("max stored nonce %d, want %d", max, n-failed-1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupedWritePanicIsAnError: a panicking function fails alone.
func TestGroupedWritePanicIsAnError(t *testing.T) { forEachBackend(t, testGroupedWritePanicIsAnError) }

func testGroupedWritePanicIsAnError(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	err := db.WriteGrouped(ctx, func(dbtx *DBTx) error {
		if err := dbtx.InsertTx(ctx, testRecord(1, addrN(2), 0)); err != nil {
			return err
		}
		panic("boom")
	})
	if err == nil {
		t.Fatal("panic not reported")
	}
	if err := db.WriteGrouped(ctx, func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, testRecord(1, addrN(2), 0)) }); err != nil {
		t.Fatalf("the panicking function's row was kept: %v", err)
	}
}

// TestTxLifecycle walks a row through its states and the queries the nonce manager uses.
func TestTxLifecycle(t *testing.T) { forEachBackend(t, testTxLifecycle) }

func testTxLifecycle(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(3)
	rec := testRecord(5, addr, 0)
	rec.IdempotencyKey = "k"
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, rec) })
	// The same nonce again, or the same idempotency key: ErrExists.
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, testRecord(5, addr, 0)) }); !errors.Is(err, ErrExists) {
		t.Fatalf("second live row at a nonce: %v", err)
	}
	dup := testRecord(5, addr, 1)
	dup.IdempotencyKey = "k"
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, dup) }); !errors.Is(err, ErrExists) {
		t.Fatalf("idempotency key twice: %v", err)
	}
	hash := common.HexToHash("0xaa")
	write(func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, rec.ID, []byte{1, 2}, hash, StateSigned) })
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, rec.ID, []byte{1}, hash, StateSigned) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("signing a signed row: %v", err)
	}
	block := common.HexToHash("0xbb")
	write(func(dbtx *DBTx) error {
		n, err := dbtx.SetMined(ctx, 5, hash, 7, block)
		if n != 1 {
			t.Errorf("SetMined changed %d rows", n)
		}
		return err
	})
	write(func(dbtx *DBTx) error {
		n, err := dbtx.Unmine(ctx, 5, 7, block)
		if n != 1 {
			t.Errorf("Unmine changed %d rows", n)
		}
		return err
	})
	write(func(dbtx *DBTx) error { _, err := dbtx.SetMined(ctx, 5, hash, 8, common.HexToHash("0xcc")); return err })
	write(func(dbtx *DBTx) error { _, err := dbtx.Confirm(ctx, 5, 8); return err })
	err := db.Read(ctx, func(dbtx *DBTx) error {
		got, err := dbtx.TxByIdempotencyKey(ctx, "p", "k")
		if err != nil {
			return err
		}
		if got.State != StateConfirmed || got.BlockNumber != 8 || got.Hash != hash || string(got.Raw) != "\x01\x02" || got.MaxCost.Int64() != 1 {
			t.Errorf("after the walk: %+v", got)
		}
		byHash, err := dbtx.TxsByHash(ctx, hash)
		if err != nil || len(byHash) != 1 || byHash[0].ID != rec.ID {
			t.Errorf("by hash: %v %v", byHash, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHandOutExpiryAndReuse: an expired handed-out slot, once released, is the lowest
// reusable slot until a live row takes it; the nonce head never goes down past a higher one.
func TestHandOutExpiryAndReuse(t *testing.T) { forEachBackend(t, testHandOutExpiryAndReuse) }

func testHandOutExpiryAndReuse(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(4)
	var recs []*TxRecord
	for i := range 3 {
		r := testRecord(1, addr, uint64(i))
		r.Kind = KindSign
		recs = append(recs, r)
	}
	err := db.Write(ctx, func(dbtx *DBTx) error {
		for i, r := range recs {
			if err := dbtx.InsertTx(ctx, r); err != nil {
				return err
			}
			exp := time.Now().Add(time.Hour)
			if i == 1 {
				exp = time.Now().Add(-time.Second)
			}
			if err := dbtx.SetHandedOut(ctx, r.ID, []byte{byte(i)}, common.BigToHash(big.NewInt(int64(i+1))), exp); err != nil {
				return err
			}
		}
		return dbtx.RaiseNextNonce(ctx, 1, addr, 3)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(dbtx *DBTx) error {
		expired, err := dbtx.ExpiredHandOuts(ctx, 1, time.Now(), 10)
		if err != nil || len(expired) != 1 || expired[0].Nonce != 1 {
			t.Fatalf("expired: %v %v", expired, err)
		}
		if err := dbtx.SetState(ctx, expired[0].ID, []string{StateHandedOut}, StateReleased, ""); err != nil {
			return err
		}
		slot, ok, err := dbtx.ReusableSlot(ctx, 1, addr, 0)
		if err != nil || !ok || slot != 1 {
			t.Fatalf("reusable slot %d %v %v, want 1", slot, ok, err)
		}
		if err := dbtx.InsertTx(ctx, testRecord(1, addr, 1)); err != nil {
			return err
		}
		if _, ok, _ := dbtx.ReusableSlot(ctx, 1, addr, 0); ok {
			t.Error("a slot taken by a live row is still reusable")
		}
		if lowered, err := dbtx.LowerNextNonce(ctx, 1, addr, 2, 1); err != nil || lowered {
			t.Errorf("lowered a head that is not at 2: %v %v", lowered, err)
		}
		if err := dbtx.RaiseNextNonce(ctx, 1, addr, 1); err != nil {
			return err
		}
		next, _, err := dbtx.NextNonce(ctx, 1, addr)
		if err != nil || next != 3 {
			t.Errorf("head went from 3 to %d", next)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInFlightAggregate: the trigger-kept count and cost sum follow inserts, every state
// change in and out of flight, and 256-bit costs exactly.
func TestInFlightAggregate(t *testing.T) { forEachBackend(t, testInFlightAggregate) }

func testInFlightAggregate(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(9)
	big1 := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(12345)) // 2^255 + 12345
	big2 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 200), big.NewInt(1))     // 2^200 - 1
	expect := func(n int, sum *big.Int) {
		t.Helper()
		err := db.Read(ctx, func(dbtx *DBTx) error {
			gn, gs, err := dbtx.InFlight(ctx, 1, addr)
			if err != nil {
				return err
			}
			if gn != n || gs.Cmp(sum) != 0 {
				t.Errorf("in flight %d costing %v, want %d costing %v", gn, gs, n, sum)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r1, r2 := testRecord(1, addr, 0), testRecord(1, addr, 1)
	r1.MaxCost, r2.MaxCost = big1, big2
	hash := common.HexToHash("0x77")
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(dbtx *DBTx) error {
		if err := dbtx.InsertTx(ctx, r1); err != nil {
			return err
		}
		return dbtx.InsertTx(ctx, r2)
	})
	expect(2, new(big.Int).Add(big1, big2))
	write(func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, r2.ID, []byte{1}, hash, StateSigned) }) // in flight → in flight
	expect(2, new(big.Int).Add(big1, big2))
	write(func(dbtx *DBTx) error { _, err := dbtx.SetMined(ctx, 1, hash, 3, common.HexToHash("0x1")); return err }) // leaves
	expect(1, big1)
	write(func(dbtx *DBTx) error { _, err := dbtx.Unmine(ctx, 1, 3, common.HexToHash("0x1")); return err }) // comes back
	expect(2, new(big.Int).Add(big1, big2))
	write(func(dbtx *DBTx) error {
		return dbtx.SetState(ctx, r1.ID, []string{StateReserved}, StateFailed, "x")
	})
	expect(1, big2)
	write(func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, `DELETE FROM txs WHERE id = ?`, r2.ID)
		return err
	})
	expect(0, new(big.Int))
	if _, err := costLimbs(new(big.Int).Lsh(big.NewInt(1), 256)); err == nil {
		t.Error("a cost of 2^256 was accepted")
	}
}

// TestGroupedWriteAfterClose: a grouped write queued as the store closes gets an answer
// (committed or errClosed) and never waits forever.
func TestGroupedWriteAfterClose(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, testConfig(t), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			err := db.WriteGrouped(ctx, func(dbtx *DBTx) error { return nil })
			if err != nil && !errors.Is(err, errClosed) {
				t.Errorf("grouped write at close: %v", err)
			}
		})
	}
	db.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("grouped writes still waiting 10s after Close")
	}
	if err := db.WriteGrouped(ctx, func(dbtx *DBTx) error { return nil }); !errors.Is(err, errClosed) {
		t.Fatalf("grouped write after Close: %v", err)
	}
}

// BenchmarkReservation: parallel nonce reservations (LockAccount, the nonce head, the
// insert) of 8 accounts through WriteGrouped: SQLite group-commits them; PostgreSQL runs each
// in its own transaction, and, for comparison, grouped as SQLite does.
func BenchmarkReservation(b *testing.B) {
	for _, tc := range []struct {
		name    string
		be      backend
		grouped bool
	}{{"sqlite", sqliteBackend, true}, {"postgres", postgresBackend, false}, {"postgres-grouped", postgresBackend, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var cfg Config
			if tc.be == postgresBackend {
				cfg = Config{Driver: DriverPostgres, DSN: testengine.Postgres(b)}
				cfg.SetDefaults()
			} else {
				cfg = Config{Path: b.TempDir() + "/bench.db"}
				cfg.SetDefaults()
			}
			db, err := open(context.Background(), cfg, Deps{}, options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if tc.be == postgresBackend && tc.grouped {
				d := *db.d
				d.groupCommit = true
				db.d = &d
			}
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					addr := addrN(int(n.Add(1) % benchAccounts))
					err := db.WriteGrouped(ctx, func(dbtx *DBTx) error {
						if err := dbtx.LockAccount(ctx, 1, addr); err != nil {
							return err
						}
						next, _, err := dbtx.NextNonce(ctx, 1, addr)
						if err != nil {
							return err
						}
						if err := dbtx.RaiseNextNonce(ctx, 1, addr, next+1); err != nil {
							return err
						}
						return dbtx.InsertTx(ctx, testRecord(1, addr, next))
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
		})
	}
}

const benchAccounts, benchParallelism = 64, 16
