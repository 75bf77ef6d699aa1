package owners

import (
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

func ids(vs ...int64) []*big.Int {
	out := make([]*big.Int, len(vs))
	for i, v := range vs {
		out[i] = big.NewInt(v)
	}
	return out
}

// TestIndexDevChain: mints, transfers and burns of the test contracts on the embedded dev
// chain; after every step the index holds exactly the balances ownerOf and balanceOf read
// from the chain, and nft_minted the tokens minted.
func TestIndexDevChain(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	e.start()
	a0, a1, a2 := e.addrs[0], e.addrs[1], e.addrs[2]
	tr := newTracked([]common.Address{a0, a1, a2, e.addrs[3]})

	nft := e.deploy(erc721C, "Alpha", "A")
	nft2 := e.deploy(erc721C, "Beta", "B")
	multi := e.deploy(erc1155C, "Multi", "M", "ipfs://x/{id}")
	coin := e.deploy(erc20C, "Coin", "C", uint8(18))
	tr.none = []common.Address{coin}
	e.check(tr) // contracts deployed, nothing minted: no rows

	steps := []struct {
		name string
		do   func()
	}{
		{"ERC721 mints", func() {
			for _, m := range []struct {
				c  common.Address
				to common.Address
				id int64
			}{{nft, a0, 1}, {nft, a0, 2}, {nft, a1, 3}, {nft2, a2, 1}} {
				e.transact(0, erc721C, m.c, "mint", m.to, big.NewInt(m.id))
				tr.addID(tr.erc721, m.c, big.NewInt(m.id))
				tr.minted[m.c]++
			}
		}},
		{"ERC721 transfers", func() {
			e.transact(0, erc721C, nft, "transferFrom", a0, a1, big.NewInt(1))
			e.transact(1, erc721C, nft, "transferFrom", a1, a2, big.NewInt(3))
			e.transact(2, erc721C, nft2, "transferFrom", a2, a2, big.NewInt(1)) // to oneself
		}},
		{"ERC721 burn", func() {
			e.transact(0, erc721C, nft, "burn", big.NewInt(2))
		}},
		{"ERC721 mint of a burned id and of the largest id", func() {
			e.transact(0, erc721C, nft, "mint", a1, big.NewInt(2))
			maxID := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
			e.transact(0, erc721C, nft, "mint", a2, maxID)
			tr.addID(tr.erc721, nft, maxID)
			tr.minted[nft] += 2
		}},
		{"ERC1155 mint and mintBatch", func() {
			e.transact(0, erc1155C, multi, "mint", a0, big.NewInt(1), big.NewInt(10))
			e.transact(0, erc1155C, multi, "mintBatch", a0, ids(2, 3), ids(5, 7))
			for _, id := range ids(1, 2, 3) {
				tr.addID(tr.erc1155, multi, id)
			}
			tr.minted[multi] += 22
		}},
		{"ERC1155 safeTransferFrom and safeBatchTransferFrom", func() {
			e.transact(0, erc1155C, multi, "safeTransferFrom", a0, a1, big.NewInt(1), big.NewInt(4), []byte{})
			e.transact(0, erc1155C, multi, "safeBatchTransferFrom", a0, a2, ids(2, 3), ids(5, 1), []byte{})
			e.transact(2, erc1155C, multi, "safeBatchTransferFrom", a2, a1, ids(3, 3), ids(1, 0), []byte{}) // an id twice, a zero value
		}},
		{"ERC1155 burn and burnBatch", func() {
			e.transact(1, erc1155C, multi, "burn", a1, big.NewInt(1), big.NewInt(4))
			e.transact(0, erc1155C, multi, "burnBatch", a0, ids(1, 3), ids(6, 6))
		}},
		{"ERC1155 amounts and ids beyond 64 bits", func() {
			huge := new(big.Int).Lsh(big.NewInt(1), 255)
			id := new(big.Int).Lsh(big.NewInt(3), 200)
			e.transact(0, erc1155C, multi, "mint", a2, id, huge)
			e.transact(2, erc1155C, multi, "safeTransferFrom", a2, a0, id, big.NewInt(1), []byte{})
			tr.addID(tr.erc1155, multi, id)
			tr.minted[multi] = 1<<63 - 1 // saturated
		}},
		{"ERC20 transfers are not NFT transfers", func() {
			e.transact(0, erc20C, coin, "mint", a0, big.NewInt(1000))
			e.transact(0, erc20C, coin, "transfer", a1, big.NewInt(5))
		}},
	}
	for _, s := range steps {
		s.do()
		e.check(tr)
		if t.Failed() {
			t.Fatalf("after step %q", s.name)
		}
	}
	// Every standard log was counted by kind, none taken for malformed. (The ERC20 logs are
	// counted as ignored only by a node that does not drop them at the filter's four topic
	// positions, as go-ethereum does.)
	chain := e.ups.Pools()[0].Name()
	for kind, want := range map[string]float64{"erc721": 10, "erc1155_single": 5, "erc1155_batch": 4, "malformed": 0} {
		if got := e.counter("web3gate_owners_logs_total", map[string]string{"chain": chain, "kind": kind}); got != want {
			t.Errorf("logs_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}
	if got, want := e.counter("web3gate_owners_indexed_block", map[string]string{"chain": chain}), float64(e.progress().Block); got != want {
		t.Errorf("indexed_block = %v, want %v", got, want)
	}
	if slices.Contains(e.logsSeen(), "owners index: round failed; retrying") {
		t.Errorf("the indexer failed a round: %v", e.logsSeen())
	}
}
