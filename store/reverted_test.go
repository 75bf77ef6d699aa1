package store

import (
	"context"
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// TestRevertedRows: a mined row that reverted becomes failed in one statement, from mined in
// its block only, keeping its block (webhook events mined, then failed with the reason);
// Confirm leaves it failed; MinedSince finds it and Unmine takes it back to broadcast, in
// flight again, its reason cleared, while a row failed before it was mined is untouched by
// both; a released slot at its nonce is not reusable.
func TestRevertedRows(t *testing.T) { forEachBackend(t, testRevertedRows) }

func testRevertedRows(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(41)
	hash := func(i int) common.Hash { return common.BigToHash(big.NewInt(int64(7000 + i))) }
	block, other := common.HexToHash("0xc1"), common.HexToHash("0xc0")
	const reason = "execution reverted: web3gate test revert"
	// Row 0 reverts in block 10; row 1 fails before it is mined; row 2 is a handed-out slot
	// at nonce 0 released before row 0 took it.
	recs := []*TxRecord{testRecord(1, addr, 0), testRecord(1, addr, 1)}
	recs[0].Principal, recs[1].Principal = "alice", "alice"
	released := testRecord(1, addr, 0)
	released.Kind = KindSign
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(dbtx *DBTx) error {
		if err := dbtx.InsertWebhook(ctx, testWebhook("wh_a", "alice", "https://a.example/1")); err != nil {
			return err
		}
		if err := dbtx.InsertTx(ctx, released); err != nil {
			return err
		}
		if err := dbtx.SetHandedOut(ctx, released.ID, []byte{1}, hash(9), released.CreatedAt); err != nil {
			return err
		}
		if err := dbtx.SetState(ctx, released.ID, []string{StateHandedOut}, StateReleased, ""); err != nil {
			return err
		}
		if err := dbtx.InsertTxs(ctx, recs); err != nil {
			return err
		}
		for i, r := range recs {
			if err := dbtx.SetSigned(ctx, r.ID, []byte{1}, hash(i), StateSigned); err != nil {
				return err
			}
		}
		if err := dbtx.SetState(ctx, recs[1].ID, []string{StateSigned}, StateFailed, "rejected by the node: fee too low"); err != nil {
			return err
		}
		_, err := dbtx.SetMined(ctx, 1, hash(0), 10, block)
		return err
	})
	var changed []bool
	write(func(dbtx *DBTx) error {
		for _, bh := range []common.Hash{other, block, block} { // another block: no; then once
			ok, err := dbtx.SetReverted(ctx, recs[0].ID, bh, reason)
			if err != nil {
				return err
			}
			changed = append(changed, ok)
		}
		if ok, err := dbtx.SetReverted(ctx, recs[1].ID, block, reason); err != nil || ok {
			t.Errorf("SetReverted of a row never mined: %v %v", ok, err)
		}
		_, err := dbtx.Confirm(ctx, 1, 20)
		return err
	})
	if !slices.Equal(changed, []bool{false, true, false}) {
		t.Errorf("SetReverted in another block, in its block, again: %v, want [false true false]", changed)
	}
	read := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Read(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	read(func(dbtx *DBTx) error {
		got, err := dbtx.TxByID(ctx, recs[0].ID)
		if err != nil {
			return err
		}
		if got.State != StateFailed || got.Error != reason || got.BlockNumber != 10 || got.BlockHash != block || got.MinedHash != hash(0) {
			t.Errorf("reverted row after Confirm: state %s, error %q, block %d %s, mined hash %s", got.State, got.Error, got.BlockNumber, got.BlockHash.Hex(), got.MinedHash.Hex())
		}
		ms, err := dbtx.MinedSince(ctx, 1, 0)
		if err != nil {
			return err
		}
		if len(ms) != 1 || ms[0].ID != recs[0].ID {
			t.Errorf("MinedSince: %d rows, want the reverted one only", len(ms))
		}
		if n, ok, err := dbtx.ReusableSlot(ctx, 1, addr, 0); err != nil || ok {
			t.Errorf("ReusableSlot over the reverted row: %d %v %v", n, ok, err)
		}
		if n, _, err := dbtx.InFlight(ctx, 1, addr); err != nil || n != 0 {
			t.Errorf("in flight with the reverted row: %d %v", n, err)
		}
		evs, err := dbtx.WebhookEvents(ctx, recs[0].ID)
		if err != nil {
			return err
		}
		var states []string
		for _, e := range evs {
			states = append(states, e.State)
		}
		if !slices.Equal(states, []string{StateMined, StateFailed}) || evs[1].Error != reason || evs[1].BlockNumber == nil {
			t.Errorf("webhook events of the reverted row: %v", states)
		}
		return nil
	})
	var n int64
	write(func(dbtx *DBTx) (err error) {
		n, err = dbtx.Unmine(ctx, 1, 10, block)
		return err
	})
	if n != 1 {
		t.Errorf("Unmine changed %d rows, want 1", n)
	}
	read(func(dbtx *DBTx) error {
		got, err := dbtx.TxByID(ctx, recs[0].ID)
		if err != nil {
			return err
		}
		if got.State != StateBroadcast || got.Error != "" || got.BlockNumber != 0 || got.MinedHash != (common.Hash{}) {
			t.Errorf("reverted row after Unmine: state %s, error %q, block %d", got.State, got.Error, got.BlockNumber)
		}
		never, err := dbtx.TxByID(ctx, recs[1].ID)
		if err != nil {
			return err
		}
		if never.State != StateFailed || never.Error != "rejected by the node: fee too low" {
			t.Errorf("row failed before mining: state %s, error %q", never.State, never.Error)
		}
		if n, _, err := dbtx.InFlight(ctx, 1, addr); err != nil || n != 1 {
			t.Errorf("in flight after Unmine: %d %v, want 1", n, err)
		}
		return nil
	})
}
