package owners

import (
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/web3gate/web3gate/e2e/anvil"
)

// anvilEnv is an env indexing a real anvil node, with dev accounts 0-3 funded there.
func anvilEnv(t *testing.T, mutate func(*ChainConfig)) (*env, *anvil.Node) {
	t.Helper()
	n := anvil.Start(t, 31337)
	client, err := ethclient.Dial(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	node := &chainNode{chainID: n.ChainID, url: n.URL, client: client}
	cfg := testChainConfig(node.chainID)
	if mutate != nil {
		mutate(&cfg)
	}
	e := newEnv(t, node, &cfg)
	for _, a := range e.addrs {
		n.Fund(t, a.Hex())
	}
	return e, n
}

func snapshot(t *testing.T, n *anvil.Node) string {
	t.Helper()
	res, err := n.Call("anvil_snapshot")
	if err != nil {
		t.Fatalf("anvil_snapshot: %v", err)
	}
	var id string
	if err := json.Unmarshal(res, &id); err != nil {
		t.Fatalf("anvil_snapshot answered %s", res)
	}
	return id
}

func revert(t *testing.T, n *anvil.Node, id string) {
	t.Helper()
	res, err := n.Call("anvil_revert", id)
	if err != nil || string(res) != "true" {
		t.Fatalf("anvil_revert(%s) = %s, %v", id, res, err)
	}
}

// TestReorgOnAnvil: blocks with transfers replaced on a real anvil node (anvil_snapshot,
// more blocks, anvil_revert, other blocks) by a shorter chain, then by a longer one: each
// time the index rolls the replaced blocks back exactly and indexes the new ones, so that
// balances and nft_minted match the chain after the reorg.
func TestReorgOnAnvil(t *testing.T) {
	e, n := anvilEnv(t, nil)
	a0, a1, a2 := e.addrs[0], e.addrs[1], e.addrs[2]
	tr := newTracked(e.addrs)
	nft := e.deploy(erc721C, "Alpha", "A")
	multi := e.deploy(erc1155C, "Multi", "M", "")
	for id := int64(1); id <= 3; id++ {
		e.transact(0, erc721C, nft, "mint", a0, big.NewInt(id))
		tr.addID(tr.erc721, nft, big.NewInt(id))
	}
	e.transact(0, erc1155C, multi, "mintBatch", a0, ids(1, 2), ids(10, 20))
	tr.addID(tr.erc1155, multi, big.NewInt(1))
	tr.addID(tr.erc1155, multi, big.NewInt(2))
	tr.addID(tr.erc721, nft, big.NewInt(9))
	tr.minted[nft], tr.minted[multi] = 3, 30
	e.start()
	e.check(tr)
	chain := e.ups.Pools()[0].Name()
	rolledBack := func() float64 {
		return e.counter("web3gate_owners_reorgs_total", map[string]string{"chain": chain, "action": "rolled_back"})
	}

	// A shorter chain: three blocks replaced by one.
	snap := snapshot(t, n)
	e.transact(0, erc721C, nft, "transferFrom", a0, a1, big.NewInt(1))
	e.transact(0, erc1155C, multi, "safeTransferFrom", a0, a1, big.NewInt(1), big.NewInt(4), []byte{})
	e.transact(0, erc721C, nft, "mint", a2, big.NewInt(9))
	tr.minted[nft]++
	e.check(tr)
	revert(t, n, snap)
	e.transact(0, erc721C, nft, "transferFrom", a0, a2, big.NewInt(1))
	tr.minted[nft]--
	e.check(tr)
	if got := rolledBack(); got != 1 {
		t.Fatalf("reorgs_total{action=rolled_back} = %v after the first reorg, want 1", got)
	}

	// A longer chain: two blocks replaced by four, with burns, mints and batch transfers.
	snap = snapshot(t, n)
	e.transact(2, erc721C, nft, "burn", big.NewInt(1))
	e.transact(0, erc1155C, multi, "burnBatch", a0, ids(1, 2), ids(10, 5))
	e.check(tr)
	revert(t, n, snap)
	e.transact(2, erc721C, nft, "transferFrom", a2, a1, big.NewInt(1))
	e.transact(0, erc1155C, multi, "safeBatchTransferFrom", a0, a2, ids(1, 2), ids(3, 20), []byte{})
	e.transact(0, erc721C, nft, "mint", a1, big.NewInt(9))
	e.transact(0, erc1155C, multi, "mint", a1, big.NewInt(2), big.NewInt(7))
	tr.minted[nft]++
	tr.minted[multi] += 7
	e.check(tr)
	if got := rolledBack(); got != 2 {
		t.Fatalf("reorgs_total{action=rolled_back} = %v after the second reorg, want 2", got)
	}
	if got := e.counter("web3gate_owners_rolled_back_blocks_total", map[string]string{"chain": chain}); got != 5 {
		t.Errorf("rolled_back_blocks_total = %v, want 5 (3 + 2)", got)
	}
}

// TestReorgDeeperThanReorgDepth: a reorg that replaces more blocks than reorgDepth keeps
// cannot be rolled back; the chain's index is rebuilt from startBlock and matches the chain.
func TestReorgDeeperThanReorgDepth(t *testing.T) {
	e, n := anvilEnv(t, func(c *ChainConfig) { c.ReorgDepth = 3 })
	a0, a1 := e.addrs[0], e.addrs[1]
	tr := newTracked(e.addrs)
	nft := e.deploy(erc721C, "Alpha", "A")
	e.transact(0, erc721C, nft, "mint", a0, big.NewInt(1))
	tr.addID(tr.erc721, nft, big.NewInt(1))
	tr.addID(tr.erc721, nft, big.NewInt(2))
	tr.minted[nft] = 1
	e.start()
	e.check(tr)

	snap := snapshot(t, n)
	for id := int64(2); id <= 7; id++ { // six blocks, twice reorgDepth
		e.transact(0, erc721C, nft, "transferFrom", a0, a1, big.NewInt(1))
		e.transact(1, erc721C, nft, "transferFrom", a1, a0, big.NewInt(1))
	}
	e.check(tr)
	revert(t, n, snap)
	e.transact(0, erc721C, nft, "mint", a1, big.NewInt(2))
	tr.minted[nft]++
	e.check(tr)
	chain := e.ups.Pools()[0].Name()
	if got := e.counter("web3gate_owners_reorgs_total", map[string]string{"chain": chain, "action": "reindexed"}); got != 1 {
		t.Errorf("reorgs_total{action=reindexed} = %v, want 1", got)
	}
}
