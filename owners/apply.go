package owners

import (
	"context"
	"math"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/web3gate/web3gate/store"
)

// The write path: the transfers of one fetched range applied to the store in one
// transaction. The range is aggregated in memory first (an ERC721 token's owner is the
// recipient of its last transfer; an ERC1155 balance is read once, then moved transfer by
// transfer), then written with a few multi-row statements. Blocks near the head (from
// undoFrom on) also record the before-image of everything they change, the first time each
// block changes it, so that a reorg can restore the state before any of them.
//
// Rules, where the logs alone do not decide:
//   - ERC721: the owner is the `to` of the token's last Transfer, whatever its `from` says
//     (so an index started after a token was minted still shows its owner once it moves);
//     a transfer to the zero address burns it.
//   - ERC1155: a transfer moves `value` from `from` to `to`; a balance that would go below
//     zero (the index started after tokens reached that holder) is taken as zero.
//   - nft_minted: +1 per ERC721 Transfer from the zero address, +value per ERC1155 id
//     transferred from the zero address; burns are not subtracted; saturates at 2^63-1.

type ownerState struct {
	owner common.Address
	has   bool // false: nobody (never minted here, or burned)
	dirty bool
}

type balanceState struct {
	amount uint256.Int
	dirty  bool
}

// mintState is a contract's nft_minted count: known (read, then kept exactly) when a block
// with undo data mints, else only the number to add.
type mintState struct {
	known bool
	value int64
	has   bool // known: a row exists
	add   uint64
	dirty bool
}

// undoKey identifies what an undo record restores.
type undoKey struct {
	kind     int
	contract common.Address
	id       uint256.Int
	owner    common.Address
}

type applier struct {
	ctx      context.Context
	tx       *store.DBTx
	chainID  uint64
	undoFrom uint64

	owners map[store.NFTToken]*ownerState
	bals   map[store.NFTBalanceKey]*balanceState
	minted map[common.Address]*mintState

	undo    []store.NFTUndo
	block   uint64             // the block whose first changes are being recorded
	touched map[undoKey]bool   // what block has recorded
	seq     int                // next Seq in block
	scratch []store.NFTBalance // reused buffers of the flush
	tokens  []store.NFTToken   //
	keys    []store.NFTBalanceKey
}

// applyTransfers applies ts (in chain order) to the store; blocks from undoFrom on record
// their before-images. It returns the undo records written.
func applyTransfers(ctx context.Context, tx *store.DBTx, chainID uint64, ts []transfer, undoFrom uint64) (int, error) {
	a := &applier{ctx: ctx, tx: tx, chainID: chainID, undoFrom: undoFrom,
		owners: map[store.NFTToken]*ownerState{}, bals: map[store.NFTBalanceKey]*balanceState{},
		minted: map[common.Address]*mintState{}, touched: map[undoKey]bool{}}
	if err := a.load(ts); err != nil {
		return 0, err
	}
	for i := range ts {
		a.apply(&ts[i])
	}
	return len(a.undo), a.flush()
}

// load reads the state the transfers need: every ERC1155 balance they move, and for the
// blocks that record before-images, the owners of their ERC721 tokens and the counts of the
// contracts they mint.
func (a *applier) load(ts []transfer) error {
	var (
		tokens   []store.NFTToken
		keys     []store.NFTBalanceKey
		contract = map[common.Address]bool{}
	)
	for i := range ts {
		t := &ts[i]
		recent := t.block >= a.undoFrom
		switch t.standard {
		case store.StandardERC721:
			tok := store.NFTToken{Contract: t.contract, ID: t.id}
			if _, ok := a.owners[tok]; !ok && recent {
				a.owners[tok] = &ownerState{}
				tokens = append(tokens, tok)
			}
		default:
			for _, who := range [2]common.Address{t.from, t.to} {
				k := store.NFTBalanceKey{Contract: t.contract, ID: t.id, Owner: who}
				if _, ok := a.bals[k]; !ok && who != (common.Address{}) {
					a.bals[k] = &balanceState{}
					keys = append(keys, k)
				}
			}
		}
		if recent && t.from == (common.Address{}) && !contract[t.contract] {
			contract[t.contract] = true
		}
	}
	if len(tokens) > 0 {
		rows, err := a.tx.NFTBalancesByToken(a.ctx, a.chainID, tokens)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Standard == store.StandardERC721 {
				a.owners[store.NFTToken{Contract: r.Contract, ID: r.ID}] = &ownerState{owner: r.Owner, has: true}
			}
		}
	}
	if len(keys) > 0 {
		rows, err := a.tx.NFTBalancesByKey(a.ctx, a.chainID, keys)
		if err != nil {
			return err
		}
		for _, r := range rows {
			a.bals[r.NFTBalanceKey].amount = r.Amount
		}
	}
	for c := range contract {
		n, ok, err := a.tx.NFTMinted(a.ctx, a.chainID, c)
		if err != nil {
			return err
		}
		a.minted[c] = &mintState{known: true, value: n, has: ok}
	}
	return nil
}

// record adds the before-image u of k, unless t's block has recorded k already.
func (a *applier) record(block uint64, k undoKey, u store.NFTUndo) {
	if block < a.undoFrom {
		return
	}
	if block != a.block {
		a.block, a.seq = block, 0
		clear(a.touched)
	}
	if a.touched[k] {
		return
	}
	a.touched[k] = true
	u.Block, u.Seq, u.Kind, u.Contract = block, a.seq, k.kind, k.contract
	a.seq++
	a.undo = append(a.undo, u)
}

func (a *applier) apply(t *transfer) {
	if t.from == (common.Address{}) {
		n := uint64(math.MaxUint64)
		if t.amount.IsUint64() {
			n = t.amount.Uint64()
		}
		a.mint(t.block, t.contract, n)
	}
	if t.standard == store.StandardERC721 {
		tok := store.NFTToken{Contract: t.contract, ID: t.id}
		st := a.owners[tok]
		if st == nil {
			st = &ownerState{}
			a.owners[tok] = st
		}
		u := store.NFTUndo{ID: t.id}
		if st.has {
			prev := st.owner
			u.Owner = &prev
		}
		a.record(t.block, undoKey{kind: store.NFTUndoOwner, contract: t.contract, id: t.id}, u)
		st.owner, st.has, st.dirty = t.to, t.to != (common.Address{}), true
		return
	}
	if t.from != (common.Address{}) {
		st := a.balance(t, t.from)
		if st.amount.Lt(&t.amount) {
			st.amount.Clear()
		} else {
			st.amount.Sub(&st.amount, &t.amount)
		}
	}
	if t.to != (common.Address{}) {
		st := a.balance(t, t.to)
		if _, overflow := st.amount.AddOverflow(&st.amount, &t.amount); overflow {
			st.amount.SetAllOne()
		}
	}
}

// balance returns who's state of t's token, marked changed, its before-image recorded.
func (a *applier) balance(t *transfer, who common.Address) *balanceState {
	k := store.NFTBalanceKey{Contract: t.contract, ID: t.id, Owner: who}
	st := a.bals[k]
	u := store.NFTUndo{ID: t.id, Owner: &k.Owner}
	if !st.amount.IsZero() {
		prev := st.amount
		u.Amount = &prev
	}
	a.record(t.block, undoKey{kind: store.NFTUndoBalance, contract: t.contract, id: t.id, owner: who}, u)
	st.dirty = true
	return st
}

func (a *applier) mint(block uint64, contract common.Address, n uint64) {
	if n == 0 {
		return // an ERC1155 mint of value 0 mints nothing
	}
	m := a.minted[contract]
	if m == nil {
		m = &mintState{}
		a.minted[contract] = m
	}
	if m.known {
		u := store.NFTUndo{}
		if m.has {
			prev := m.value
			u.Minted = &prev
		}
		a.record(block, undoKey{kind: store.NFTUndoMinted, contract: contract}, u)
		m.value = int64(min(uint64(m.value)+min(n, math.MaxInt64), math.MaxInt64))
		m.has = true
	} else {
		m.add = satAdd(m.add, n)
	}
	m.dirty = true
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// flush writes the aggregated state: ERC721 tokens replaced (every row of a moved token
// deleted, its new owner inserted), ERC1155 balances upserted or deleted at zero, the mint
// counts, and the before-images.
func (a *applier) flush() error {
	ctx, tx, chain := a.ctx, a.tx, a.chainID
	put, tokens, keys := a.scratch[:0], a.tokens[:0], a.keys[:0]
	for tok, st := range a.owners {
		if !st.dirty {
			continue
		}
		tokens = append(tokens, tok)
		if st.has {
			r := store.NFTBalance{NFTBalanceKey: store.NFTBalanceKey{Contract: tok.Contract, ID: tok.ID, Owner: st.owner}, Standard: store.StandardERC721}
			r.Amount.SetOne()
			put = append(put, r)
		}
	}
	for k, st := range a.bals {
		switch {
		case !st.dirty:
		case st.amount.IsZero():
			keys = append(keys, k)
		default:
			put = append(put, store.NFTBalance{NFTBalanceKey: k, Amount: st.amount, Standard: store.StandardERC1155})
		}
	}
	// In key order: neighbouring rows share B-tree pages, which SQLite then visits once.
	slices.SortFunc(tokens, compareTokens)
	slices.SortFunc(keys, compareKeys)
	slices.SortFunc(put, func(x, y store.NFTBalance) int { return compareKeys(x.NFTBalanceKey, y.NFTBalanceKey) })
	if err := tx.DeleteNFTTokens(ctx, chain, tokens); err != nil {
		return err
	}
	if err := tx.DeleteNFTBalances(ctx, chain, keys); err != nil {
		return err
	}
	if err := tx.PutNFTBalances(ctx, chain, put); err != nil {
		return err
	}
	for c, m := range a.minted {
		var err error
		switch {
		case !m.dirty:
		case m.known:
			err = tx.SetNFTMinted(ctx, chain, c, m.value, m.has)
		case m.add > 0:
			err = tx.AddNFTMinted(ctx, chain, c, m.add)
		}
		if err != nil {
			return err
		}
	}
	a.scratch, a.tokens, a.keys = put, tokens, keys
	return tx.PutNFTUndo(ctx, chain, a.undo)
}

// rollback restores the state before the blocks above block to (their before-images, each
// thing to its oldest one) and forgets those blocks. It returns how many things it restored.
func rollback(ctx context.Context, tx *store.DBTx, chainID, to uint64) (int, error) {
	undo, err := tx.NFTUndo(ctx, chainID, to)
	if err != nil {
		return 0, err
	}
	// Newest first: the record seen last for a key is its oldest.
	oldest := map[undoKey]store.NFTUndo{}
	for _, u := range undo {
		k := undoKey{kind: u.Kind, contract: u.Contract, id: u.ID}
		if u.Kind == store.NFTUndoBalance {
			k.owner = *u.Owner
		}
		oldest[k] = u
	}
	var (
		tokens []store.NFTToken
		keys   []store.NFTBalanceKey
		put    []store.NFTBalance
	)
	for _, u := range oldest {
		switch u.Kind {
		case store.NFTUndoOwner:
			tokens = append(tokens, store.NFTToken{Contract: u.Contract, ID: u.ID})
			if u.Owner != nil {
				r := store.NFTBalance{NFTBalanceKey: store.NFTBalanceKey{Contract: u.Contract, ID: u.ID, Owner: *u.Owner}, Standard: store.StandardERC721}
				r.Amount.SetOne()
				put = append(put, r)
			}
		case store.NFTUndoBalance:
			k := store.NFTBalanceKey{Contract: u.Contract, ID: u.ID, Owner: *u.Owner}
			if u.Amount == nil {
				keys = append(keys, k)
			} else {
				put = append(put, store.NFTBalance{NFTBalanceKey: k, Amount: *u.Amount, Standard: store.StandardERC1155})
			}
		case store.NFTUndoMinted:
			var n int64
			if u.Minted != nil {
				n = *u.Minted
			}
			if err := tx.SetNFTMinted(ctx, chainID, u.Contract, n, u.Minted != nil); err != nil {
				return 0, err
			}
		}
	}
	if err := tx.DeleteNFTTokens(ctx, chainID, tokens); err != nil {
		return 0, err
	}
	if err := tx.DeleteNFTBalances(ctx, chainID, keys); err != nil {
		return 0, err
	}
	if err := tx.PutNFTBalances(ctx, chainID, put); err != nil {
		return 0, err
	}
	return len(oldest), tx.RewindNFTIndex(ctx, chainID, to)
}

func compareTokens(x, y store.NFTToken) int {
	if c := x.Contract.Cmp(y.Contract); c != 0 {
		return c
	}
	return x.ID.Cmp(&y.ID)
}

func compareKeys(x, y store.NFTBalanceKey) int {
	if c := compareTokens(store.NFTToken{Contract: x.Contract, ID: x.ID}, store.NFTToken{Contract: y.Contract, ID: y.ID}); c != 0 {
		return c
	}
	return x.Owner.Cmp(y.Owner)
}
