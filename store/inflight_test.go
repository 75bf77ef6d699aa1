package store

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// TestInFlightGroupedWrites: the in-flight sums after the writes a stream of sends makes in
// groups: one INSERT of many rows for several accounts (a reservation group; on PostgreSQL
// one trigger call for the statement), rows of one statement in and out of flight, and a
// transaction that takes many rows out of flight one statement each (the confirmer; on
// PostgreSQL the subtractions run at its commit). The sums are exact once each commits.
func TestInFlightGroupedWrites(t *testing.T) { forEachBackend(t, testInFlightGroupedWrites) }

func testInFlightGroupedWrites(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	a, b := addrN(21), addrN(22)
	expect := func(step string, addr common.Address, n int, sum int64) {
		t.Helper()
		err := db.Read(ctx, func(dbtx *DBTx) error {
			gn, gs, err := dbtx.InFlight(ctx, 1, addr)
			if err != nil {
				return err
			}
			if gn != n || gs.Cmp(big.NewInt(sum)) != 0 {
				t.Errorf("%s: %s in flight %d costing %v, want %d costing %d", step, addr.Hex(), gn, gs, n, sum)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}

	// One statement: nonces 0-9 of a (costs 1-10), 0-4 of b (costs 1-5), and nonce 10 of a
	// already failed (not in flight).
	var recs []*TxRecord
	for n := range uint64(10) {
		recs = append(recs, testRecord(1, a, n))
	}
	for n := range uint64(5) {
		recs = append(recs, testRecord(1, b, n))
	}
	failed := testRecord(1, a, 10)
	failed.State = StateFailed
	recs = append(recs, failed)
	write(func(dbtx *DBTx) error { return dbtx.InsertTxs(ctx, recs) })
	expect("one insert", a, 10, 55)
	expect("one insert", b, 5, 15)

	// Two more groups of a, the second in the same transaction as a row leaving flight.
	more := []*TxRecord{testRecord(1, a, 11), testRecord(1, a, 12)}
	write(func(dbtx *DBTx) error { return dbtx.InsertTxs(ctx, more) })
	expect("second insert", a, 12, 55+12+13)
	write(func(dbtx *DBTx) error {
		if err := dbtx.SetState(ctx, recs[0].ID, []string{StateReserved}, StateFailed, "x"); err != nil {
			return err
		}
		return dbtx.InsertTxs(ctx, []*TxRecord{testRecord(1, a, 13)})
	})
	expect("a row out, a row in", a, 12, 55+12+13-1+14)

	// Signed, then mined in one transaction one statement each, as the confirmer does:
	// nonces 1-9 of a and 0-4 of b.
	hash := func(i int) common.Hash { return common.BigToHash(big.NewInt(int64(1000 + i))) }
	write(func(dbtx *DBTx) error {
		for i, r := range recs[1:15] {
			if err := dbtx.SetSigned(ctx, r.ID, []byte{1}, hash(i), StateSigned); err != nil {
				return err
			}
		}
		return nil
	})
	expect("signed", a, 12, 55+12+13-1+14)
	write(func(dbtx *DBTx) error {
		for i := range recs[1:15] {
			if _, err := dbtx.SetMined(ctx, 1, hash(i), 7, common.HexToHash("0x7")); err != nil {
				return err
			}
		}
		return nil
	})
	expect("mined", a, 3, 12+13+14)
	expect("mined", b, 0, 0)

	// A transaction that fails after moving rows into and out of flight changes nothing.
	err := db.Write(ctx, func(dbtx *DBTx) error {
		if n, err := dbtx.Unmine(ctx, 1, 7, common.HexToHash("0x7")); err != nil || n != 14 {
			t.Errorf("unmined %d rows (%v), want 14", n, err)
		}
		if err := dbtx.SetState(ctx, more[0].ID, []string{StateReserved}, StateFailed, "x"); err != nil {
			return err
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatalf("write = %v, want the rollback", err)
	}
	expect("rolled back", a, 3, 12+13+14)
	expect("rolled back", b, 0, 0)

	// stuck counts in flight (a request whose fee bumps reached a cap): into it and back to
	// broadcast change nothing; mined from it, it leaves flight once.
	write(func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, more[0].ID, []byte{1}, hash(100), StateSigned) })
	write(func(dbtx *DBTx) error {
		return dbtx.SetState(ctx, more[0].ID, []string{StateSigned}, StateBroadcast, "")
	})
	write(func(dbtx *DBTx) error {
		return dbtx.SetState(ctx, more[0].ID, []string{StateBroadcast}, StateStuck, "cap")
	})
	expect("stuck", a, 3, 12+13+14)
	write(func(dbtx *DBTx) error {
		return dbtx.SetState(ctx, more[0].ID, []string{StateStuck}, StateBroadcast, "")
	})
	write(func(dbtx *DBTx) error {
		return dbtx.SetState(ctx, more[0].ID, []string{StateBroadcast}, StateStuck, "cap")
	})
	expect("stuck again", a, 3, 12+13+14)
	write(func(dbtx *DBTx) error {
		_, err := dbtx.SetMined(ctx, 1, hash(100), 8, common.HexToHash("0x8"))
		return err
	})
	expect("mined from stuck", a, 2, 13+14)
}

type rollbackError struct{}

func (rollbackError) Error() string { return "roll back" }

var errRollback error = rollbackError{}
