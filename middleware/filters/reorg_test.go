package filters

import (
	"encoding/json"
	"math/big"
	"slices"
	"testing"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/store"
)

// TestFilterReorgOnAnvil: blocks with logs replaced on a real anvil node (anvil_snapshot, a
// block, anvil_revert, two other blocks): the next poll of a logs filter reports the replaced
// block's logs again with "removed": true, then the new branch's logs; a block filter reports
// the new branch's blocks.
func TestFilterReorgOnAnvil(t *testing.T) {
	n := anvilNode(t)
	r := newReplica(t, n, testStore(t, store.DriverSQLite), Config{})
	erc20 := contracts.MustLoad("TestERC20")
	token := n.deploy(erc20, "T", "T", uint8(18))
	logs := r.newFilter(alice, map[string]any{"address": token, "fromBlock": "earliest"})
	blocks := r.newFilter(alice, nil)

	snap, err := n.anvil.Call("anvil_snapshot")
	if err != nil {
		t.Fatalf("anvil_snapshot: %v", err)
	}
	gone := n.transact(erc20, token, "mint", n.addrs[1], big.NewInt(1))
	before := r.logsUntil(alice, logs, 1)
	if len(before) != 1 || *before[0].Removed || before[0].TxHash != gone.TxHash {
		t.Fatalf("before the reorg: %+v, want the mint %s", before, gone.TxHash)
	}
	if hs := r.blocksUntil(alice, blocks, gone.BlockHash.Hex()); !slices.Equal(hs, []string{gone.BlockHash.Hex()}) {
		t.Fatalf("block filter before the reorg = %v, want [%s]", hs, gone.BlockHash.Hex())
	}
	rawBefore := r.must(alice, "eth_getFilterLogs", logs)

	var snapID string
	if err := json.Unmarshal(snap, &snapID); err != nil {
		t.Fatalf("anvil_snapshot answered %s", snap)
	}
	if res, err := n.anvil.Call("anvil_revert", snapID); err != nil || string(res) != "true" {
		t.Fatalf("anvil_revert = %s, %v", res, err)
	}
	// The new branch: another mint in the block of the same number, then an empty block.
	came := n.transact(erc20, token, "mint", n.addrs[2], big.NewInt(2))
	if came.BlockNumber.Cmp(gone.BlockNumber) != 0 || came.BlockHash == gone.BlockHash {
		t.Fatalf("the new branch's mint is in block %d %s; the replaced one was %d %s", came.BlockNumber, came.BlockHash, gone.BlockNumber, gone.BlockHash)
	}
	top := n.mine()

	after := r.logsUntil(alice, logs, 2)
	if len(after) != 2 {
		t.Fatalf("after the reorg: %+v, want the replaced mint removed, then the new one", after)
	}
	if !*after[0].Removed || after[0].TxHash != gone.TxHash || after[0].BlockHash != gone.BlockHash {
		t.Fatalf("first log after the reorg = %+v, want the replaced mint with removed: true", after[0])
	}
	if *after[1].Removed || after[1].TxHash != came.TxHash || after[1].BlockHash != came.BlockHash {
		t.Fatalf("second log after the reorg = %+v, want the new mint", after[1])
	}
	// eth_getFilterLogs reads the chain as it is now: the new mint only.
	var first, again []rpcLog
	if err := json.Unmarshal(rawBefore, &first); err != nil || len(first) != 1 || first[0].TxHash != gone.TxHash {
		t.Fatalf("eth_getFilterLogs before the reorg = %s, want the replaced mint", rawBefore)
	}
	rawAfter := r.must(alice, "eth_getFilterLogs", logs)
	if err := json.Unmarshal(rawAfter, &again); err != nil || len(again) != 1 || again[0].TxHash != came.TxHash {
		t.Fatalf("eth_getFilterLogs after the reorg = %s, want the new mint only", rawAfter)
	}
	if hs := r.blocksUntil(alice, blocks, n.hash(top)); !slices.Equal(hs, n.hashes(came.BlockNumber.Uint64(), top)) {
		t.Fatalf("block filter after the reorg = %v, want the new branch's blocks %d..%d", hs, came.BlockNumber, top)
	}
}
