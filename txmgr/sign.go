package txmgr

// Signing a reserved transaction and persisting its bytes before any broadcast.

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// complete signs a reserved send, persists the bytes and broadcasts them. retry is true when
// the nonce turned out to be used outside web3gate and nothing was sent.
func (t *Manager) complete(ctx context.Context, ch Chain, rec *store.TxRecord, r *txreq.Request) (common.Hash, bool, error) {
	raw, hash, err := t.signRecord(rec, r)
	if err != nil {
		t.giveUp(ctx, ch, rec, err.Error())
		return common.Hash{}, false, jsonrpc.ErrInternal.With("signing failed")
	}
	err = t.db.WriteOne(ctx, func(tx *store.DBTx) error {
		return tx.SetSigned(ctx, rec.ID, raw, hash, store.StateSigned)
	})
	if err != nil {
		// Nothing was sent; the row stays reserved and the confirmer signs and sends it.
		return common.Hash{}, false, t.notStored(rec, err,
			"nothing was sent yet: the nonce stays reserved and web3gate signs and sends the transaction once the store answers (a retry with the same Idempotency-Key gets its hash)")
	}
	rec.Raw, rec.Hash, rec.State = raw, hash, store.StateSigned
	return t.broadcast(ctx, ch, rec)
}

// notStored is the answer to a request whose signed transaction could not be stored (what
// follows says what becomes of it). A store that cannot serve answers -32002 "store
// unavailable" (its outage is logged by the store); any other failure is internal, logged
// here.
func (t *Manager) notStored(rec *store.TxRecord, err error, what string) error {
	if errors.Is(err, store.ErrUnavailable) {
		return jsonrpc.ErrStoreUnavailable.Withf("store unavailable: the signed transaction could not be stored; %s", what).
			WithData(map[string]any{"nonce": hexutil.Uint64(rec.Nonce), "state": store.StateReserved})
	}
	t.log.Error("persisting a signed transaction failed", zap.Uint64("chain", rec.ChainID),
		zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce), zap.Error(err))
	return jsonrpc.ErrInternal.With("storing the signed transaction failed")
}

// signRecord signs the transaction of rec (built from r, or from the stored fields when r is
// nil) with rec's nonce.
func (t *Manager) signRecord(rec *store.TxRecord, r *txreq.Request) ([]byte, common.Hash, error) {
	if r == nil {
		var err error
		if r, err = txreq.ParseFill(append(append([]byte("["), rec.Fields...), ']'), rec.ChainID); err != nil {
			return nil, common.Hash{}, fmt.Errorf("stored fields of tx %d: %w", rec.ID, err)
		}
	}
	chainID := new(big.Int).SetUint64(rec.ChainID)
	signed, err := t.keys.SignTx(rec.Address, r.Tx(rec.Nonce, chainID), chainID)
	if err != nil {
		return nil, common.Hash{}, fmt.Errorf("sign: %w", err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return nil, common.Hash{}, fmt.Errorf("encode: %w", err)
	}
	return raw, signed.Hash(), nil
}
