package txmgr

// Failing a transaction for good without leaving its nonce a gap (giveUp, fillGap).

import (
	"context"
	"encoding/json"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// giveUp fails rec for good and makes sure its nonce does not stay a gap: when it is the
// account's newest nonce the head moves back onto it, otherwise a zero-value self-transfer
// fills it.
func (t *Manager) giveUp(ctx context.Context, ch Chain, rec *store.TxRecord, reason string) {
	var lowered bool
	state := store.StateFailed
	if rec.Kind == store.KindSign {
		state = store.StateReleased // never handed out: the next signing takes the slot
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		// Lowering the nonce head decides on what a reservation reads: not while one runs.
		if err := tx.LockAccount(ctx, rec.ChainID, rec.Address); err != nil {
			return err
		}
		if err := tx.SetState(ctx, rec.ID, []string{store.StateReserved, store.StateSigned, store.StateBroadcast},
			state, reason); err != nil {
			return err
		}
		var err error
		lowered, err = tx.LowerNextNonce(ctx, rec.ChainID, rec.Address, rec.Nonce+1, rec.Nonce)
		return err
	})
	if err != nil {
		t.log.Error("failing a transaction failed", proxy.RequestIDField(ctx), zap.Int64("tx", rec.ID), zap.Error(err))
		return
	}
	t.log.Warn("transaction failed", proxy.RequestIDField(ctx), zap.Int64("tx", rec.ID), zap.Uint64("chain", rec.ChainID),
		zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce), zap.String("reason", reason))
	if !lowered && rec.Kind != store.KindSign {
		t.fillGap(ctx, ch, rec.ChainID, rec.Address, rec.Principal, rec.Nonce)
	}
}

// fillerGas is the gas of a plain transfer.
const fillerGas = 21000

// fillGap sends a zero-value self-transfer at nonce, so that the account's later transactions
// are not stuck behind a nonce that will never be used. Its fee is twice the node's gas price
// suggestion.
func (t *Manager) fillGap(ctx context.Context, ch Chain, chainID uint64, addr common.Address, principal string, nonce uint64) {
	logger := t.log.With(zap.Uint64("chain", chainID), zap.String("from", addr.Hex()), zap.Uint64("nonce", nonce))
	price, err := callQuantity(ctx, ch, "eth_gasPrice")
	if err != nil {
		logger.Error("filling a nonce: no gas price", zap.Error(err))
		return
	}
	p := price.Mul(price, big.NewInt(2))
	r := &txreq.Request{From: addr, To: &addr, Gas: fillerGas, Value: new(big.Int), Data: []byte{}, GasPrice: p}
	fields, _ := json.Marshal(r)
	rec := &store.TxRecord{ChainID: chainID, Address: addr, Nonce: nonce, Principal: principal, Kind: store.KindFiller,
		State: store.StateReserved, Fields: fields, MaxCost: r.MaxCost()}
	err = t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		if err := tx.LockAccount(ctx, chainID, addr); err != nil {
			return err
		}
		return tx.InsertTx(ctx, rec)
	})
	if err != nil {
		logger.Error("filling a nonce: record", zap.Error(err))
		return
	}
	if _, _, err := t.complete(ctx, ch, rec, r); err != nil {
		logger.Error("filling a nonce: not accepted yet; the confirmer retries", zap.Error(err))
		return
	}
	logger.Info("nonce filled with a zero-value self-transfer", zap.String("hash", rec.Hash.Hex()))
}
