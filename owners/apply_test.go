package owners

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/web3gate/web3gate/store"
)

func openStore(t *testing.T) *store.DB {
	t.Helper()
	sc := store.Config{Path: filepath.Join(t.TempDir(), "web3gate.db")}
	sc.SetDefaults()
	db, err := store.Open(context.Background(), sc, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// model is the index's rules applied one transfer at a time, the plain way: what the store
// must hold after the same transfers.
type model struct {
	bal    map[store.NFTBalanceKey]store.NFTBalance
	minted map[common.Address]int64
}

func newModel() *model {
	return &model{bal: map[store.NFTBalanceKey]store.NFTBalance{}, minted: map[common.Address]int64{}}
}

func (m *model) clone() *model {
	return &model{bal: maps.Clone(m.bal), minted: maps.Clone(m.minted)}
}

func (m *model) apply(t transfer) {
	if t.from == (common.Address{}) && !t.amount.IsZero() {
		n := uint64(math.MaxUint64)
		if t.amount.IsUint64() {
			n = t.amount.Uint64()
		}
		m.minted[t.contract] = int64(min(uint64(m.minted[t.contract])+min(n, math.MaxInt64), math.MaxInt64))
	}
	if t.standard == store.StandardERC721 {
		for k, b := range m.bal {
			if k.Contract == t.contract && k.ID == t.id && b.Standard == store.StandardERC721 {
				delete(m.bal, k)
			}
		}
		if t.to != (common.Address{}) {
			k := store.NFTBalanceKey{Contract: t.contract, ID: t.id, Owner: t.to}
			m.bal[k] = store.NFTBalance{NFTBalanceKey: k, Amount: *uint256.NewInt(1), Standard: store.StandardERC721}
		}
		return
	}
	move := func(who common.Address, add bool) {
		if who == (common.Address{}) {
			return
		}
		k := store.NFTBalanceKey{Contract: t.contract, ID: t.id, Owner: who}
		b := m.bal[k]
		switch {
		case add:
			if _, overflow := b.Amount.AddOverflow(&b.Amount, &t.amount); overflow {
				b.Amount.SetAllOne()
			}
		case b.Amount.Lt(&t.amount):
			b.Amount.Clear()
		default:
			b.Amount.Sub(&b.Amount, &t.amount)
		}
		if b.Amount.IsZero() {
			delete(m.bal, k)
			return
		}
		b.NFTBalanceKey, b.Standard = k, store.StandardERC1155
		m.bal[k] = b
	}
	move(t.from, false)
	move(t.to, true)
}

// state is everything the store holds for chain 1 in the model's form.
func state(t *testing.T, db *store.DB, contracts []common.Address) *model {
	t.Helper()
	ctx := context.Background()
	m := newModel()
	err := db.Read(ctx, func(tx *store.DBTx) error {
		for _, c := range contracts {
			rows, err := tx.NFTBalancesPage(ctx, 1, c, nil, nil, 1<<20, nil)
			if err != nil {
				return err
			}
			for _, r := range rows {
				m.bal[r.NFTBalanceKey] = r
			}
			n, ok, err := tx.NFTMinted(ctx, 1, c)
			if err != nil {
				return err
			}
			if ok {
				m.minted[c] = n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameState(a, b *model) error {
	if !maps.Equal(a.bal, b.bal) {
		return fmt.Errorf("balances differ:\n got  %v\n want %v", a.bal, b.bal)
	}
	// A contract whose mints were all rolled back has no row, as before them.
	if !maps.Equal(a.minted, b.minted) {
		return fmt.Errorf("minted differs: got %v, want %v", a.minted, b.minted)
	}
	return nil
}

// randomHistory is blocks 1..n of random transfers among few contracts, ids and holders, so
// that they collide: mints, transfers, burns, self-transfers, ERC1155 moves of more than the
// holder has (the index started late), huge amounts.
func randomHistory(r *rand.Rand, n int) ([][]transfer, []common.Address) {
	contracts := []common.Address{{0xc1}, {0xc2}, {0xc3}}
	holders := []common.Address{{}, {0xa1}, {0xa2}, {0xa3}}
	blocks := make([][]transfer, n+1)
	for b := 1; b <= n; b++ {
		for range r.IntN(4) {
			t := transfer{block: uint64(b), contract: contracts[r.IntN(3)], from: holders[r.IntN(4)], to: holders[r.IntN(4)]}
			t.id.SetUint64(uint64(r.IntN(4)))
			if t.contract == contracts[0] {
				t.standard = store.StandardERC721
				t.amount.SetOne()
			} else {
				t.standard = store.StandardERC1155
				t.amount.SetUint64(uint64(r.IntN(5)))
				if r.IntN(20) == 0 {
					t.amount.SetAllOne()
				}
			}
			blocks[b] = append(blocks[b], t)
		}
	}
	return blocks, contracts
}

// TestApplyMatchesModel: random histories applied in batches of random sizes leave the store
// as the rules applied transfer by transfer; rolled back to any block, the store is as it
// was after that block; applied again, as at the end.
func TestApplyMatchesModel(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(10) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 7))
			const n = 60
			blocks, contracts := randomHistory(r, n)
			after := make([]*model, n+1) // the model after each block
			m := newModel()
			after[0] = m.clone()
			for b := 1; b <= n; b++ {
				for _, tr := range blocks[b] {
					m.apply(tr)
				}
				after[b] = m.clone()
			}
			db := openStore(t)
			// The blocks from undoFrom on record their before-images; the first ones do not
			// (a backfill far from the head).
			undoFrom := uint64(1 + r.IntN(n/2))
			applyRange := func(from, to int) {
				t.Helper()
				var ts []transfer
				for b := from; b <= to; b++ {
					ts = append(ts, blocks[b]...)
				}
				if err := db.Write(ctx, func(tx *store.DBTx) error {
					_, err := applyTransfers(ctx, tx, 1, ts, undoFrom)
					return err
				}); err != nil {
					t.Fatal(err)
				}
			}
			applyAll := func(from int) {
				t.Helper()
				for b := from; b <= n; {
					to := min(n, b+r.IntN(7))
					applyRange(b, to)
					if err := sameState(state(t, db, contracts), after[to]); err != nil {
						t.Fatalf("after blocks %d-%d: %v", b, to, err)
					}
					b = to + 1
				}
			}
			applyAll(1)
			back := int(undoFrom) - 1 + r.IntN(n-int(undoFrom)+1) // any block whose successors have undo data
			if err := db.Write(ctx, func(tx *store.DBTx) error {
				_, err := rollback(ctx, tx, 1, uint64(back))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := sameState(state(t, db, contracts), after[back]); err != nil {
				t.Fatalf("rolled back to block %d: %v", back, err)
			}
			applyAll(back + 1)
		})
	}
}

// TestPartialHistory: an index started after tokens were minted still shows an ERC721
// token's owner once it moves, and an ERC1155 holder sending more than the index has seen
// arrive goes to zero, not below.
func TestPartialHistory(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	c721, c1155 := common.Address{0xc1}, common.Address{0xc2}
	a, b := common.Address{0xa1}, common.Address{0xa2}
	one, five := uint256.NewInt(1), uint256.NewInt(5)
	ts := []transfer{
		{block: 10, contract: c721, from: a, to: b, id: *uint256.NewInt(7), amount: *one, standard: store.StandardERC721},
		{block: 10, contract: c1155, from: a, to: b, id: *uint256.NewInt(1), amount: *five, standard: store.StandardERC1155},
	}
	if err := db.Write(ctx, func(tx *store.DBTx) error {
		_, err := applyTransfers(ctx, tx, 1, ts, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got := state(t, db, []common.Address{c721, c1155})
	want := newModel()
	for _, tr := range ts {
		want.apply(tr)
	}
	if err := sameState(got, want); err != nil {
		t.Fatal(err)
	}
	keys := slices.Collect(maps.Keys(got.bal))
	if len(keys) != 2 || got.bal[store.NFTBalanceKey{Contract: c721, ID: *uint256.NewInt(7), Owner: b}].Amount != *one ||
		got.bal[store.NFTBalanceKey{Contract: c1155, ID: *uint256.NewInt(1), Owner: b}].Amount != *five || len(got.minted) != 0 {
		t.Fatalf("state = %+v", got)
	}
}
