package owners

import (
	"context"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/store"
)

// TestRestartResumes: a Service stopped and started again on the same store resumes after
// the last indexed block: it reads only the blocks made meanwhile, and the balances match.
func TestRestartResumes(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	a0, a1 := e.addrs[0], e.addrs[1]
	tr := newTracked(e.addrs)
	nft := e.deploy(erc721C, "Alpha", "A")
	for id := int64(1); id <= 3; id++ {
		e.transact(0, erc721C, nft, "mint", a0, big.NewInt(id))
		tr.addID(tr.erc721, nft, big.NewInt(id))
	}
	tr.minted[nft] = 3
	e.start()
	e.check(tr)
	before := e.progress().Block
	e.stop()

	e.transact(0, erc721C, nft, "transferFrom", a0, a1, big.NewInt(2))
	e.transact(0, erc721C, nft, "burn", big.NewInt(3))
	e.start()
	e.check(tr)
	chain := e.ups.Pools()[0].Name()
	if got := e.counter("web3gate_owners_logs_total", map[string]string{"chain": chain, "kind": "erc721"}); got != 2 {
		t.Errorf("after the restart the index read %v ERC721 logs, want the 2 made meanwhile (it resumes after block %d)", got, before)
	}
}

// TestScopeChangeRebuilds: a Service started with another startBlock drops the index built
// for the old one and rebuilds it: tokens that moved only before the new start block are
// not seen; nft_minted counts only the mints from there on.
func TestScopeChangeRebuilds(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	a0, a1 := e.addrs[0], e.addrs[1]
	nft := e.deploy(erc721C, "Alpha", "A")
	e.transact(0, erc721C, nft, "mint", a0, big.NewInt(1))
	e.transact(0, erc721C, nft, "mint", a0, big.NewInt(2))
	e.start()
	e.waitIndexed()
	e.stop()

	later := e.transact(0, erc721C, nft, "transferFrom", a0, a1, big.NewInt(2))
	e.transact(0, erc721C, nft, "mint", a1, big.NewInt(3))
	e.cfg.StartBlock = later
	e.start()
	tr := newTracked(e.addrs)
	tr.addID(tr.erc721, nft, big.NewInt(2))
	tr.addID(tr.erc721, nft, big.NewInt(3))
	tr.minted[nft] = 1
	e.check(tr) // token 1 (minted before the new start block, never moved since) is not seen
	if p := e.progress(); !strings.Contains(p.Scope, "startBlock="+big.NewInt(int64(later)).String()+" ") {
		t.Errorf("progress scope = %q, want the new start block %d", p.Scope, later)
	}
	if !slices.Contains(e.logsSeen(), "owners index: startBlock or contracts changed since the index was built; rebuilding it") {
		t.Errorf("no rebuild logged: %v", e.logsSeen())
	}
}

// TestForgetChain drops every row of the chain's index, and only of that chain.
func TestForgetChain(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	nft := e.deploy(erc721C, "Alpha", "A")
	e.transact(0, erc721C, nft, "mint", e.addrs[0], big.NewInt(1))
	e.start()
	e.waitIndexed()
	e.stop()
	other := uint64(99)
	ctx := context.Background()
	err := e.db.Write(ctx, func(tx *store.DBTx) error {
		var b store.NFTBalance
		b.Contract, b.Owner, b.Standard = nft, e.addrs[0], store.StandardERC721
		b.Amount.SetOne()
		return tx.PutNFTBalances(ctx, other, []store.NFTBalance{b})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ForgetChain(ctx, node.chainID); err != nil {
		t.Fatal(err)
	}
	counts := map[uint64]int{}
	if err := e.db.Read(ctx, func(tx *store.DBTx) error {
		for _, id := range []uint64{node.chainID, other} {
			var n, p int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM nft_balances WHERE chain_id = ?`, int64(id)).Scan(&n); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM nft_index_progress WHERE chain_id = ?`, int64(id)).Scan(&p); err != nil {
				return err
			}
			counts[id] = n + p
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if counts[node.chainID] != 0 || counts[other] != 1 {
		t.Fatalf("rows after ForgetChain: %v, want none of chain %d and the one of chain %d", counts, node.chainID, other)
	}
}
