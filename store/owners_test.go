package store

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
)

func u256(s string) uint256.Int {
	v, err := uint256.FromHex(s)
	if err != nil {
		panic(err)
	}
	return *v
}

func TestUintKeyOrderIsNumericOrder(t *testing.T) {
	vals := []string{"0x0", "0x1", "0xff", "0x100", "0x1ff", "0x10000", "0xffffffffffffffff", "0x10000000000000000",
		"0x" + strings.Repeat("f", 64)}
	for i, s := range vals {
		v := u256(s)
		k := uintKey(&v)
		back, err := parseUintKey(k)
		if err != nil || !back.Eq(&v) {
			t.Fatalf("%s: key %x decodes to %s, %v", s, k, back.Hex(), err)
		}
		if i > 0 {
			prev := u256(vals[i-1])
			if bytes.Compare(uintKey(&prev), k) >= 0 {
				t.Errorf("key of %s (%x) does not sort after that of %s (%x)", s, k, vals[i-1], uintKey(&prev))
			}
		}
	}
	for _, bad := range [][]byte{nil, {}, {1}, {2, 1}, {1, 1, 1}, {2, 0, 1}, append([]byte{33}, make([]byte, 33)...)} {
		if _, err := parseUintKey(bad); err == nil {
			t.Errorf("parseUintKey(%x) accepted", bad)
		}
	}
}

func balance(contract common.Address, id string, owner common.Address, amount string, std int) NFTBalance {
	return NFTBalance{NFTBalanceKey: NFTBalanceKey{Contract: contract, ID: u256(id), Owner: owner}, Amount: u256(amount), Standard: std}
}

func TestNFTBalancesWriteReadPage(t *testing.T) { forEachBackend(t, testNFTBalancesWriteReadPage) }

func testNFTBalancesWriteReadPage(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx := context.Background()
	c1, c2 := addrN(0xc1), addrN(0xc2)
	a, b, c := addrN(0xa), addrN(0xb), addrN(0xc)
	big := "0x" + strings.Repeat("f", 64)
	var rows []NFTBalance
	// 300 tokens of c1 (more than one chunk), ERC1155 balances of c2 with a 256-bit amount.
	for i := 300; i > 0; i-- {
		rows = append(rows, balance(c1, uint256.NewInt(uint64(i)).Hex(), []common.Address{a, b, c}[i%3], "0x1", StandardERC721))
	}
	rows = append(rows, balance(c2, "0x0", b, big, StandardERC1155), balance(c2, "0x0", a, "0x5", StandardERC1155),
		balance(c2, big, c, "0x2", StandardERC1155))
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.PutNFTBalances(ctx, 7, rows) }); err != nil {
		t.Fatal(err)
	}
	page := func(contract common.Address, id *uint256.Int, after *NFTBalanceKey, limit int) []NFTBalance {
		t.Helper()
		var out []NFTBalance
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			out, err = dbtx.NFTBalancesPage(ctx, 7, contract, id, after, limit, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Walking c1 in pages of 7 yields every token once, in numeric order.
	var walked []NFTBalance
	var after *NFTBalanceKey
	for {
		p := page(c1, nil, after, 7)
		walked = append(walked, p...)
		if len(p) < 7 {
			break
		}
		after = &p[len(p)-1].NFTBalanceKey
	}
	if len(walked) != 300 {
		t.Fatalf("walked %d rows, want 300", len(walked))
	}
	for i, r := range walked {
		if r.ID.Uint64() != uint64(i+1) || r.Amount.Uint64() != 1 || r.Standard != StandardERC721 || r.Contract != c1 {
			t.Fatalf("row %d = %+v", i, r)
		}
	}
	// One token: its owners in address order; after an owner, the rest.
	zero := u256("0x0")
	got := page(c2, &zero, nil, 10)
	if len(got) != 2 || got[0].Owner != a || got[1].Owner != b || got[1].Amount.Hex() != big || got[0].Amount.Uint64() != 5 {
		t.Fatalf("owners of c2/0 = %+v", got)
	}
	if got := page(c2, &zero, &NFTBalanceKey{Owner: a}, 10); len(got) != 1 || got[0].Owner != b {
		t.Fatalf("owners of c2/0 after a = %+v", got)
	}
	if got := page(c2, nil, nil, 10); len(got) != 3 || got[2].ID.Hex() != big {
		t.Fatalf("c2 = %+v", got)
	}

	// Lookups by key and by token; deletes.
	err := db.Write(ctx, func(dbtx *DBTx) error {
		keys := []NFTBalanceKey{rows[0].NFTBalanceKey, {Contract: c2, ID: zero, Owner: c}, rows[0].NFTBalanceKey}
		got, err := dbtx.NFTBalancesByKey(ctx, 7, keys)
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0] != rows[0] {
			t.Errorf("NFTBalancesByKey = %+v, want only %+v", got, rows[0])
		}
		byToken, err := dbtx.NFTBalancesByToken(ctx, 7, []NFTToken{{Contract: c2, ID: zero}, {Contract: c1, ID: u256("0x2")}})
		if err != nil {
			return err
		}
		if len(byToken) != 3 {
			t.Errorf("NFTBalancesByToken = %+v, want 3 rows", byToken)
		}
		// ERC721 rows only: the ERC1155 rows of c2/0 stay.
		if err := dbtx.DeleteNFTTokens(ctx, 7, []NFTToken{{Contract: c2, ID: zero}, {Contract: c1, ID: u256("0x2")}}); err != nil {
			return err
		}
		return dbtx.DeleteNFTBalances(ctx, 7, []NFTBalanceKey{rows[0].NFTBalanceKey})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := page(c2, nil, nil, 10); len(got) != 3 {
		t.Fatalf("c2 after DeleteNFTTokens of its ERC1155 token 0 = %+v", got)
	}
	if got := page(c1, nil, nil, 1000); len(got) != 298 || got[0].ID.Uint64() != 1 || got[1].ID.Uint64() != 3 || got[len(got)-1].ID.Uint64() != 299 {
		t.Fatalf("c1 after deleting tokens 2 and 300: %d rows", len(got))
	}
	// Another chain sees nothing.
	var other []NFTBalance
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		other, err = dbtx.NFTBalancesPage(ctx, 8, c1, nil, nil, 10, nil)
		return err
	}); err != nil || len(other) != 0 {
		t.Fatalf("chain 8: %+v, %v", other, err)
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.PutNFTBalances(ctx, 7, []NFTBalance{balance(c1, "0x1", a, "0x0", StandardERC721)})
	}); err == nil {
		t.Fatal("a zero amount was stored")
	}
}

// The owners route's queries seek the primary key: no scan, no sort, whatever the page.
func TestNFTQueryPlans(t *testing.T) {
	db := openTest(t, testConfig(t), options{})
	for _, q := range []string{qNFTTokenPage, qNFTContractPage, qNFTBalancesByKey.sized[32], qNFTBalancesByToken.sized[8], qDeleteNFTTokens.sized[128], qDeleteNFTBalances.sized[1]} {
		n := strings.Count(q, "?")
		args := make([]any, n)
		for i := range args {
			args[i] = []byte{1}
		}
		text := strings.Join(queryPlan(t, db, q, args...), "; ")
		if !strings.Contains(text, "SEARCH nft_balances USING PRIMARY KEY (chain_id=? AND contract=? AND") || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("plan of %s:\n%s", q, text)
		}
	}
}

func TestNFTMintedSaturatesAndSets(t *testing.T) { forEachBackend(t, testNFTMintedSaturatesAndSets) }

func testNFTMintedSaturatesAndSets(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx := context.Background()
	c := addrN(0xc1)
	read := func() (int64, bool) {
		t.Helper()
		var (
			n  int64
			ok bool
		)
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			n, ok, err = dbtx.NFTMinted(ctx, 3, c)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n, ok
	}
	if _, ok := read(); ok {
		t.Fatal("a row before any mint")
	}
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(dbtx *DBTx) error { return dbtx.AddNFTMinted(ctx, 3, c, 5) })
	write(func(dbtx *DBTx) error { return dbtx.AddNFTMinted(ctx, 3, c, 2) })
	if n, ok := read(); !ok || n != 7 {
		t.Fatalf("minted = %d %v, want 7", n, ok)
	}
	write(func(dbtx *DBTx) error { return dbtx.AddNFTMinted(ctx, 3, c, math.MaxUint64) })
	if n, _ := read(); n != math.MaxInt64 {
		t.Fatalf("minted = %d, want saturated at 2^63-1", n)
	}
	write(func(dbtx *DBTx) error { return dbtx.AddNFTMinted(ctx, 3, c, 1) })
	if n, _ := read(); n != math.MaxInt64 {
		t.Fatalf("minted = %d after adding to a saturated count", n)
	}
	write(func(dbtx *DBTx) error { return dbtx.SetNFTMinted(ctx, 3, c, 4, true) })
	if n, ok := read(); !ok || n != 4 {
		t.Fatalf("minted = %d %v, want 4", n, ok)
	}
	write(func(dbtx *DBTx) error { return dbtx.SetNFTMinted(ctx, 3, c, 0, false) })
	if _, ok := read(); ok {
		t.Fatal("row left after SetNFTMinted(ok=false)")
	}
}

func TestNFTIndexProgressBlocksUndo(t *testing.T) { forEachBackend(t, testNFTIndexProgressBlocksUndo) }

func testNFTIndexProgressBlocksUndo(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx := context.Background()
	c, a := addrN(0xc1), addrN(0xa)
	hash := func(n byte) common.Hash { return common.Hash{n} }
	err := db.Read(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.NFTIndexProgress(ctx, 5)
		return err
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("progress before any = %v, want ErrNotFound", err)
	}
	prev := int64(9)
	amount := u256("0x3")
	undo := []NFTUndo{
		{Block: 11, Seq: 0, Kind: NFTUndoOwner, Contract: c, ID: u256("0x1")},
		{Block: 11, Seq: 1, Kind: NFTUndoMinted, Contract: c, Minted: &prev},
		{Block: 12, Seq: 0, Kind: NFTUndoBalance, Contract: c, ID: u256("0x2"), Owner: &a, Amount: &amount},
		{Block: 12, Seq: 1, Kind: NFTUndoOwner, Contract: c, ID: u256("0x1"), Owner: &a},
		{Block: 13, Seq: 0, Kind: NFTUndoMinted, Contract: c},
	}
	err = db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.PutNFTIndexProgress(ctx, &NFTIndexProgress{ChainID: 5, Scope: "s", Block: 13, Hash: hash(13)}); err != nil {
			return err
		}
		var blocks []NFTIndexBlock
		for n := byte(1); n <= 13; n++ {
			blocks = append(blocks, NFTIndexBlock{Number: uint64(n), Hash: hash(n), Undo: n > 10})
		}
		if err := dbtx.PutNFTIndexBlocks(ctx, 5, blocks); err != nil {
			return err
		}
		return dbtx.PutNFTUndo(ctx, 5, undo)
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		p      *NFTIndexProgress
		blocks []NFTIndexBlock
		got    []NFTUndo
	)
	read := func() {
		t.Helper()
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			if p, err = dbtx.NFTIndexProgress(ctx, 5); err != nil {
				return err
			}
			if blocks, err = dbtx.NFTIndexBlocks(ctx, 5, 0); err != nil {
				return err
			}
			got, err = dbtx.NFTUndo(ctx, 5, 10)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if p.Block != 13 || p.Hash != hash(13) || p.Scope != "s" {
		t.Fatalf("progress = %+v", p)
	}
	if len(blocks) != 13 || blocks[0].Number != 13 || !blocks[0].Undo || blocks[12].Undo || blocks[12].Hash != hash(1) {
		t.Fatalf("blocks = %+v", blocks)
	}
	want := slices.Clone(undo)
	sort.SliceStable(want, func(i, j int) bool {
		return want[i].Block > want[j].Block || want[i].Block == want[j].Block && want[i].Seq > want[j].Seq
	})
	if len(got) != len(want) {
		t.Fatalf("undo = %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Block != w.Block || g.Seq != w.Seq || g.Kind != w.Kind || g.Contract != w.Contract || g.ID != w.ID ||
			(g.Owner == nil) != (w.Owner == nil) || (g.Owner != nil && *g.Owner != *w.Owner) ||
			(g.Amount == nil) != (w.Amount == nil) || (g.Amount != nil && *g.Amount != *w.Amount) ||
			(g.Minted == nil) != (w.Minted == nil) || (g.Minted != nil && *g.Minted != *w.Minted) {
			t.Errorf("undo[%d] = %+v, want %+v", i, g, w)
		}
	}

	// Rewind to 11 drops 12 and 13; prune below 5 drops 1-4.
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.RewindNFTIndex(ctx, 5, 11); err != nil {
			return err
		}
		return dbtx.PruneNFTIndex(ctx, 5, 5)
	}); err != nil {
		t.Fatal(err)
	}
	read()
	if len(blocks) != 7 || blocks[0].Number != 11 || blocks[6].Number != 5 || len(got) != 2 || got[0].Block != 11 {
		t.Fatalf("after rewind and prune: blocks %+v, undo %+v", blocks, got)
	}

	// DeleteNFTIndex leaves nothing of the chain, and other chains untouched.
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.PutNFTBalances(ctx, 5, []NFTBalance{balance(c, "0x1", a, "0x1", StandardERC721)}); err != nil {
			return err
		}
		if err := dbtx.PutNFTBalances(ctx, 6, []NFTBalance{balance(c, "0x1", a, "0x1", StandardERC721)}); err != nil {
			return err
		}
		if err := dbtx.AddNFTMinted(ctx, 5, c, 1); err != nil {
			return err
		}
		n, err := dbtx.DeleteNFTIndex(ctx, 5)
		if n != 1 {
			t.Errorf("DeleteNFTIndex removed %d balances, want 1", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		for _, table := range []string{"nft_balances", "nft_minted", "nft_index_progress", "nft_index_blocks", "nft_undo"} {
			var n int
			if err := dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE chain_id = 5`).Scan(&n); err != nil {
				return err
			}
			counts[table] = n
		}
		var n int
		if err := dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM nft_balances WHERE chain_id = 6`).Scan(&n); err != nil {
			return err
		}
		counts["chain 6"] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"nft_balances": 0, "nft_minted": 0, "nft_index_progress": 0, "nft_index_blocks": 0, "nft_undo": 0, "chain 6": 1}; !maps.Equal(counts, want) {
		t.Fatalf("rows after DeleteNFTIndex: %v, want %v", counts, want)
	}
}
