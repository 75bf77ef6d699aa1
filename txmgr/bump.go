package txmgr

// The automatic fee bumper: the confirmer re-signs priced-out transactions with raised fees.

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// Fee bumping, speed-up and cancel. A request (a txs row) whose transaction the chain has
// priced out is signed again at the same nonce with raised fees: by the confirmer when it
// stayed out of every block for wallet.transactions.bump.after (a bump), or at once through
// POST /v1/transactions/{hash}/speedup and /cancel (a zero-value self-transfer). Each such
// version is stored with its bytes (store.TxVersion) before it is broadcast, so a crash
// between the two loses nothing: the confirmer's recovery broadcasts the newest version. The
// request keeps the hash its caller got; whichever version a block takes settles it (mined,
// or cancelled for a cancel), the others count as replaced. docs/signing.md tells the rules.

// errBumpCap wraps why an automatic bump cannot go on (a cap, the funds): the request is stuck.
var errBumpCap = errors.New("bump cap reached")

func (t *Manager) bumpRules(chainID uint64) bumpRules {
	if br, ok := t.bumps[chainID]; ok {
		return br
	}
	return t.cfg.Bump.forChain(chainID)
}

// feeBumpable reports whether the confirmer may bump rec: fees web3gate filled (and gap
// fillers, which it prices) always, unless the caller said "X-Fee-Bump: deny"; fees the
// caller set only with "X-Fee-Bump: allow" or bump.callerPriced.
func (t *Manager) feeBumpable(rec *store.TxRecord, callerPriced bool) bool {
	switch {
	case rec.Kind == store.KindSign:
		return false
	case rec.FeeBump == store.FeeBumpDeny:
		return false
	case rec.FeeBump == store.FeeBumpAllow || rec.Kind == store.KindFiller || callerPriced:
		return true
	}
	filled := func(name string) bool { return slices.Contains(rec.Filled, name) }
	return filled("gasPrice") || filled("maxFeePerGas") && filled("maxPriorityFeePerGas")
}

// autoBump is the confirmer's fee bumping, once per new head: every broadcast request of the
// chain that may be bumped and stayed out of every block for bump.after is re-signed with
// raised fees, when it is the lowest open nonce of its account (what holds the account's
// later transactions back) or its fee cap is below the base fee (priced out, whatever holds
// it). A bump past a cap makes it stuck; stuck ones are left to the caller (speed-up with
// explicit fees, cancel) and to the chain (they may still be mined).
func (c *confirmer) autoBump(ctx context.Context, head *block) {
	br := c.t.bumpRules(c.chainID)
	if !br.enabled || head == nil {
		return
	}
	h := uint64(head.Number)
	if br.after.Blocks > 0 && c.bumpBegun && h == c.bumpHead {
		return // once per head
	}
	c.bumpHead, c.bumpBegun = h, true
	var rows []*store.TxRecord
	if err := c.t.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		rows, err = tx.BumpCandidates(ctx, c.chainID, maxRowsPerTick)
		return err
	}); err != nil {
		if ctx.Err() == nil {
			c.log.Warn("confirmer: reading transactions to bump failed", zap.Error(err))
		}
		return
	}
	now := time.Now()
	live := make(map[int64]bool, len(rows))
	var prev common.Address
	for i, rec := range rows {
		first := i == 0 || rec.Address != prev
		prev = rec.Address
		live[rec.ID] = true
		s, ok := c.seen[rec.ID]
		if !ok || s.versions != rec.Versions {
			// First sight of this version: its clock starts now (a restart starts it again).
			s = seenAt{versions: rec.Versions, block: h, at: now}
			if rec.Versions == 0 && br.after.Duration > 0 {
				s.at = rec.CreatedAt
			}
			c.seen[rec.ID] = s
		}
		if rec.State == store.StateStuck || !c.t.feeBumpable(rec, br.callerPriced) {
			continue
		}
		due := br.after.Blocks > 0 && h-s.block >= br.after.Blocks || br.after.Duration > 0 && now.Sub(s.at) >= br.after.Duration
		if !due || !(first || c.pricedOut(ctx, rec, head.BaseFee.ToInt())) {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, c.t.cfg.BroadcastTimeout)
		// Mined meanwhile (a block the scan has not read)? Then there is nothing to bump.
		if mined, err := c.t.settle(wctx, c.ch, rec); err != nil || mined {
			cancel()
			continue
		}
		_, err := c.t.signVersion(wctx, c.ch, rec, store.VersionBump, nil, head.BaseFee.ToInt())
		cancel()
		switch {
		case errors.Is(err, errBumpCap):
			c.t.markStuck(ctx, rec, err)
		case errors.Is(err, store.ErrVersionRace):
		case err != nil:
			c.log.Warn("confirmer: bumping a transaction failed; retrying at the next block", zap.Int64("tx", rec.ID), zap.Error(err))
		}
	}
	for id := range c.seen {
		if !live[id] {
			delete(c.seen, id)
		}
	}
}

// seenAt is when the confirmer first saw a request's newest version pending.
type seenAt struct {
	versions int
	block    uint64
	at       time.Time
}

// pricedOut: the highest fee cap (or gasPrice) of rec's versions is below baseFee.
func (c *confirmer) pricedOut(ctx context.Context, rec *store.TxRecord, baseFee *big.Int) bool {
	if baseFee == nil {
		return false
	}
	vs, err := c.t.Versions(ctx, rec)
	if err != nil {
		return false
	}
	hi, err := highest(rec, vs)
	if err != nil {
		return false
	}
	price := hi.GasPrice
	if hi.Type() == types.DynamicFeeTxType {
		price = hi.MaxFeePerGas
	}
	return price != nil && price.Cmp(baseFee) < 0
}

// markStuck moves rec to stuck (logged and counted once, at the change).
func (t *Manager) markStuck(ctx context.Context, rec *store.TxRecord, why error) {
	if rec.State == store.StateStuck {
		return
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		return tx.SetState(ctx, rec.ID, []string{store.StateBroadcast}, store.StateStuck, why.Error())
	})
	if errors.Is(err, store.ErrNotFound) {
		return // settled meanwhile
	}
	if err != nil {
		t.log.Warn("marking a transaction stuck failed", zap.Int64("tx", rec.ID), zap.Error(err))
		return
	}
	rec.State = store.StateStuck
	t.metrics.stuck.WithLabelValues(chainLabel(rec.ChainID)).Inc()
	t.log.Warn("transaction stuck: no more fee bumps", zap.Uint64("chain", rec.ChainID), zap.String("from", rec.Address.Hex()),
		zap.Uint64("nonce", rec.Nonce), zap.String("hash", rec.Hash.Hex()), zap.String("reason", why.Error()))
}
