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

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
	"github.com/web3gate/web3gate/wallet"
)

// complete signs a reserved send, persists the bytes and broadcasts them. retry is true when
// the nonce turned out to be used outside web3gate and nothing was sent.
func (t *Manager) complete(ctx context.Context, ch Chain, rec *store.TxRecord, r *txreq.Request) (common.Hash, bool, error) {
	_, span := t.startSpan(ctx, "txmgr.sign", rec)
	raw, hash, err := t.signRecord(ctx, rec, r)
	tracing.End(span, err)
	if err != nil {
		t.signFailed(ctx, rec, err)
		if rec.Kind == store.KindFiller && errors.Is(err, wallet.ErrSignerUnavailable) {
			// A filler exists to unblock the account: it stays reserved, and the confirmer
			// signs and sends it once the backend answers (failing it would only make
			// another filler for the same nonce, which the backend cannot sign either).
			return common.Hash{}, false, SigningError(err)
		}
		t.giveUp(ctx, ch, rec, err.Error())
		return common.Hash{}, false, SigningError(err)
	}
	pctx, span := t.startSpan(ctx, "txmgr.persist", rec)
	err = t.db.WriteOne(pctx, func(tx *store.DBTx) error {
		return tx.SetSigned(pctx, rec.ID, raw, hash, store.StateSigned)
	})
	tracing.End(span, err)
	if err != nil {
		// Nothing was sent; the row stays reserved and the confirmer signs and sends it.
		return common.Hash{}, false, t.notStored(ctx, rec, err,
			"nothing was sent yet: the nonce stays reserved and web3gate signs and sends the transaction once the store answers (a retry with the same Idempotency-Key gets its hash)")
	}
	rec.Raw, rec.Hash, rec.State = raw, hash, store.StateSigned
	bctx, span := t.startSpan(ctx, "txmgr.broadcast", rec)
	hash, retry, err := t.broadcast(bctx, ch, rec)
	tracing.End(span, err)
	return hash, retry, err
}

// signFailed logs a signature that failed, with what the client is not told.
func (t *Manager) signFailed(ctx context.Context, rec *store.TxRecord, err error) {
	t.log.Warn("signing failed", proxy.RequestIDField(ctx), zap.Int64("tx", rec.ID), zap.Uint64("chain", rec.ChainID),
		zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce), zap.String("kind", rec.Kind), zap.Error(err))
}

// SigningError is the JSON-RPC answer to a signature that failed: -32002 "signer unavailable"
// (HTTP 503) when the key's backend is down or slow (retry later), with the backend's reason;
// -32603 "signing failed" for anything else, whose detail is logged by the caller, not
// answered. Neither ever carries key material or credentials: the backends' errors do not.
func SigningError(err error) error {
	if errors.Is(err, wallet.ErrSignerUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return jsonrpc.ErrSignerUnavailable.Withf("signer unavailable: %v; nothing was signed or sent, retry later", err)
	}
	return jsonrpc.ErrInternal.With("signing failed")
}

// notStored is the answer to a request whose signed transaction could not be stored (what
// follows says what becomes of it). A store that cannot serve answers -32002 "store
// unavailable" (its outage is logged by the store); any other failure is internal, logged
// here.
func (t *Manager) notStored(ctx context.Context, rec *store.TxRecord, err error, what string) error {
	if errors.Is(err, store.ErrUnavailable) {
		return jsonrpc.ErrStoreUnavailable.Withf("store unavailable: the signed transaction could not be stored; %s", what).
			WithData(map[string]any{"nonce": hexutil.Uint64(rec.Nonce), "state": store.StateReserved})
	}
	t.log.Error("persisting a signed transaction failed", proxy.RequestIDField(ctx), zap.Uint64("chain", rec.ChainID),
		zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce), zap.Error(err))
	return jsonrpc.ErrInternal.With("storing the signed transaction failed")
}

// signRecord signs the transaction of rec (built from r, or from the stored fields when r is
// nil) with rec's nonce.
func (t *Manager) signRecord(ctx context.Context, rec *store.TxRecord, r *txreq.Request) ([]byte, common.Hash, error) {
	if r == nil {
		var err error
		if r, err = txreq.ParseFill(append(append([]byte("["), rec.Fields...), ']'), rec.ChainID); err != nil {
			return nil, common.Hash{}, fmt.Errorf("stored fields of tx %d: %w", rec.ID, err)
		}
	}
	chainID := new(big.Int).SetUint64(rec.ChainID)
	signed, err := t.keys.SignTx(ctx, rec.Address, r.Tx(rec.Nonce, chainID), chainID)
	if err != nil {
		return nil, common.Hash{}, fmt.Errorf("sign: %w", err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return nil, common.Hash{}, fmt.Errorf("encode: %w", err)
	}
	return raw, signed.Hash(), nil
}
