package store

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// TestReservationState: the one-statement read of a reservation equals NextNonce,
// ReusableSlot and InFlight read one by one, through the account's life: no head, a head,
// rows in flight, a released slot, the slot taken again.
func TestReservationState(t *testing.T) { forEachBackend(t, testReservationState) }

func testReservationState(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(3)
	check := func(step string) {
		t.Helper()
		err := db.Read(ctx, func(dbtx *DBTx) error {
			got, err := dbtx.ReservationState(ctx, 5, addr)
			if err != nil {
				return err
			}
			next, ok, err := dbtx.NextNonce(ctx, 5, addr)
			if err != nil {
				return err
			}
			_, released, err := dbtx.ReusableSlot(ctx, 5, addr, 0)
			if err != nil {
				return err
			}
			n, cost, err := dbtx.InFlight(ctx, 5, addr)
			if err != nil {
				return err
			}
			if got.Next != next || got.HasHead != ok || got.Released != released || got.InFlight != n || got.Cost.Cmp(cost) != 0 {
				t.Fatalf("%s: ReservationState %+v, one by one next %d (head %v), released %v, in flight %d cost %s",
					step, got, next, ok, released, n, cost)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	check("no head")
	var recs []*TxRecord
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		for n := range uint64(3) {
			recs = append(recs, testRecord(5, addr, n))
		}
		recs[1].IdempotencyKey = "k"
		if err := dbtx.InsertTxs(ctx, recs); err != nil {
			return err
		}
		return dbtx.RaiseNextNonce(ctx, 5, addr, 3)
	}); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.ID == 0 || i > 0 && r.ID <= recs[i-1].ID || r.CreatedAt.IsZero() {
			t.Fatalf("InsertTxs: row %d has id %d, created %v: want ids in order", i, r.ID, r.CreatedAt)
		}
		var got *TxRecord
		if err := db.Read(ctx, func(dbtx *DBTx) (err error) { got, err = dbtx.TxByID(ctx, r.ID); return err }); err != nil ||
			got.Nonce != r.Nonce || got.IdempotencyKey != r.IdempotencyKey || got.MaxCost.Cmp(r.MaxCost) != 0 {
			t.Fatalf("row %d stored as %+v (%v)", i, got, err)
		}
	}
	check("three in flight")
	expires := time.Now().Add(-time.Second)
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.SetHandedOut(ctx, recs[1].ID, []byte{1}, hashN(1), expires); err != nil {
			return err
		}
		return dbtx.SetState(ctx, recs[1].ID, []string{StateHandedOut}, StateReleased, "")
	}); err != nil {
		t.Fatal(err)
	}
	check("a released slot")
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertTxs(ctx, []*TxRecord{testRecord(5, addr, 1)}) }); err != nil {
		t.Fatal(err)
	}
	check("the slot taken again")

	// A conflicting row fails the whole statement with ErrExists, and records nothing.
	err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.InsertTxs(ctx, []*TxRecord{testRecord(5, addr, 7), testRecord(5, addr, 0)})
	})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("InsertTxs with a live nonce taken: %v, want ErrExists", err)
	}
	check("after the refused insert")
}

// TestReadOneWriteOne: a single statement through ReadOne and WriteOne reads and writes as
// through Read and WriteGrouped, and a lock outside a transaction is refused.
func TestReadOneWriteOne(t *testing.T) { forEachBackend(t, testReadOneWriteOne) }

func testReadOneWriteOne(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(4)
	rec := testRecord(5, addr, 0)
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, rec) }); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteOne(ctx, func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, rec.ID, []byte{2}, hashN(2), StateSigned) }); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteOne(ctx, func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, rec.ID, []byte{3}, hashN(3), StateSigned) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second SetSigned: %v, want ErrNotFound", err)
	}
	var got *TxRecord
	if err := db.ReadOne(ctx, func(dbtx *DBTx) (err error) { got, err = dbtx.TxByID(ctx, rec.ID); return err }); err != nil ||
		got.State != StateSigned || got.Hash != hashN(2) {
		t.Fatalf("ReadOne: %+v, %v", got, err)
	}
	var n int
	var cost *big.Int
	if err := db.ReadOne(ctx, func(dbtx *DBTx) (err error) { n, cost, err = dbtx.InFlight(ctx, 5, addr); return err }); err != nil ||
		n != 1 || cost.Cmp(rec.MaxCost) != 0 {
		t.Fatalf("ReadOne in flight: %d %v %v", n, cost, err)
	}
	done := make(chan error, 1)
	db.WriteGroupedLater(func(dbtx *DBTx) error {
		err := dbtx.SetState(context.Background(), rec.ID, []string{StateSigned}, StateBroadcast, "")
		done <- err
		return err
	})
	if err := <-done; err != nil {
		t.Fatalf("deferred write: %v", err)
	}
	// Its commit follows (SQLite: the group's).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := db.ReadOne(ctx, func(dbtx *DBTx) (err error) { got, err = dbtx.TxByID(ctx, rec.ID); return err }); err != nil {
			t.Fatal(err)
		}
		if got.State == StateBroadcast {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the deferred write: state %s", got.State)
		}
	}
	if be == postgresBackend {
		err := db.WriteOne(ctx, func(dbtx *DBTx) error { return dbtx.LockAccount(ctx, 5, addr) })
		if err == nil {
			t.Fatal("LockAccount outside a transaction succeeded")
		}
	}
}

func hashN(n byte) common.Hash { return common.Hash{31: n} }
