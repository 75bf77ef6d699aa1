package store

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// TestSetMinedMany: a block's hashes marked in one call change exactly the rows SetMined
// would: signed, broadcast and handed-out rows of the chain, rows mined in another block; not
// rows of another chain, rows already in this block, confirmed or reserved rows, nor unknown
// hashes. The in-flight sums follow.
func TestSetMinedMany(t *testing.T) { forEachBackend(t, testSetMinedMany) }

func testSetMinedMany(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(31)
	hash := func(i int) common.Hash { return common.BigToHash(big.NewInt(int64(5000 + i))) }
	block, other := common.HexToHash("0xb1"), common.HexToHash("0xb0")
	// Rows 0-5 on chain 1 (costs 1-6), signed with hashes 0-5; row 6 on chain 2 with hash 6.
	var recs []*TxRecord
	for n := range uint64(6) {
		recs = append(recs, testRecord(1, addr, n))
	}
	recs = append(recs, testRecord(2, addr, 0))
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(dbtx *DBTx) error {
		if err := dbtx.InsertTxs(ctx, recs); err != nil {
			return err
		}
		for i, r := range recs[:5] {
			if err := dbtx.SetSigned(ctx, r.ID, []byte{1}, hash(i), StateSigned); err != nil {
				return err
			}
		}
		if err := dbtx.SetSigned(ctx, recs[6].ID, []byte{1}, hash(6), StateSigned); err != nil {
			return err
		}
		// Row 1 broadcast, row 2 mined in another block, row 3 mined in this block, row 4
		// confirmed; row 5 stays reserved.
		if err := dbtx.SetState(ctx, recs[1].ID, []string{StateSigned}, StateBroadcast, ""); err != nil {
			return err
		}
		if _, err := dbtx.SetMined(ctx, 1, hash(2), 9, other); err != nil {
			return err
		}
		if _, err := dbtx.SetMined(ctx, 1, hash(3), 10, block); err != nil {
			return err
		}
		if _, err := dbtx.SetMined(ctx, 1, hash(4), 8, other); err != nil {
			return err
		}
		_, err := dbtx.Confirm(ctx, 1, 8)
		return err
	})

	var changed int64
	write(func(dbtx *DBTx) (err error) {
		changed, err = dbtx.SetMinedMany(ctx, 1, []common.Hash{hash(0), hash(1), hash(2), hash(3), hash(4), hash(5), hash(6), hash(7)}, 10, block)
		return err
	})
	if changed != 3 {
		t.Errorf("SetMinedMany changed %d rows, want 3 (rows 0, 1 and 2)", changed)
	}
	want := []struct {
		state string
		block common.Hash
	}{{StateMined, block}, {StateMined, block}, {StateMined, block}, {StateMined, block}, {StateConfirmed, other}, {StateReserved, common.Hash{}}, {StateSigned, common.Hash{}}}
	err := db.Read(ctx, func(dbtx *DBTx) error {
		for i, r := range recs {
			got, err := dbtx.TxByID(ctx, r.ID)
			if err != nil {
				return err
			}
			if got.State != want[i].state || got.BlockHash != want[i].block {
				t.Errorf("row %d: %s in block %s, want %s in block %s", i, got.State, got.BlockHash, want[i].state, want[i].block)
			}
		}
		n, cost, err := dbtx.InFlight(ctx, 1, addr)
		if err != nil {
			return err
		}
		if n != 1 || cost.Cmp(big.NewInt(6)) != 0 {
			t.Errorf("chain 1: in flight %d costing %v, want 1 costing 6 (row 5)", n, cost)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	write(func(dbtx *DBTx) (err error) {
		changed, err = dbtx.SetMinedMany(ctx, 1, nil, 11, block)
		return err
	})
	if changed != 0 {
		t.Errorf("SetMinedMany of no hashes changed %d rows", changed)
	}
}
