package txmgr

// Speed-up and cancel (POST /v1/transactions/{hash}/speedup and /cancel): Replace.

import (
	"context"
	"errors"
	"math/big"
	"net/http"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// Errors of the speed-up and cancel routes (REST: the HTTP status is the answer's).
var (
	// ErrNotReplaceable: the request is settled (mined, confirmed, cancelled, failed), not
	// broadcast by web3gate (handed out by eth_signTransaction), or not signed yet.
	ErrNotReplaceable = &jsonrpc.Error{Code: -32000, Message: "the transaction cannot be replaced", HTTPStatus: http.StatusConflict}
	// ErrReplacementUnderpriced: explicit fees below the replacement rule, or malformed.
	ErrReplacementUnderpriced = &jsonrpc.Error{Code: -32602, Message: "replacement fees refused", HTTPStatus: http.StatusBadRequest}
	// ErrFeeCap: the fees pass wallet.transactions.bump.maxFeeCap, a signing rule, or the funds.
	ErrFeeCap = &jsonrpc.Error{Code: -32003, Message: "replacement fees above a cap", HTTPStatus: http.StatusForbidden}
)

// ReplaceFees are a caller's explicit fees for a speed-up or cancel: MaxFeePerGas and
// MaxPriorityFeePerGas for a type 2 transaction, GasPrice for a legacy one. All nil: by the
// bump rules.
type ReplaceFees struct {
	MaxFeePerGas, MaxPriorityFeePerGas, GasPrice *big.Int
}

func (f *ReplaceFees) explicit() bool {
	return f != nil && (f.MaxFeePerGas != nil || f.MaxPriorityFeePerGas != nil || f.GasPrice != nil)
}

// Replace is POST /v1/transactions/{hash}/speedup (kind speedup) and /cancel (kind cancel):
// principal's request with any of its hashes gets a new version, with fees (explicit) or by
// the bump rules now. It returns the request after the change and the version signed.
func (t *Manager) Replace(ctx context.Context, principal string, hash common.Hash, kind string, fees *ReplaceFees) (*store.TxRecord, *store.TxVersion, error) {
	rec, err := t.Transaction(ctx, principal, hash)
	if err != nil {
		return nil, nil, err
	}
	switch rec.State {
	case store.StateBroadcast, store.StateStuck, store.StateSigned:
	case store.StateMined, store.StateConfirmed:
		return nil, nil, ErrNotReplaceable.Withf("the transaction is %s already (block %d): nothing to replace", rec.State, rec.BlockNumber)
	case store.StateHandedOut:
		return nil, nil, ErrNotReplaceable.With("the transaction was signed with eth_signTransaction: its caller holds the bytes and broadcasts them, web3gate cannot replace it")
	case store.StateReserved:
		return nil, nil, ErrNotReplaceable.With("the transaction is not signed yet: retry in a moment")
	default:
		return nil, nil, ErrNotReplaceable.Withf("the transaction is %s: nothing to replace", rec.State)
	}
	if rec.Kind == store.KindSign {
		return nil, nil, ErrNotReplaceable.With("the transaction was signed with eth_signTransaction: its caller holds the bytes")
	}
	ch, err := t.chain(ctx, rec.ChainID)
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.BroadcastTimeout)
	defer cancel()
	var baseFee *big.Int
	if !fees.explicit() {
		b, err := t.readLatestBlock(wctx, ch, rec.ChainID)
		if err != nil {
			return nil, nil, err
		}
		baseFee = b.baseFee
	}
	v, err := t.signVersion(wctx, ch, rec, kind, fees, baseFee)
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, store.ErrVersionRace):
		return nil, nil, ErrNotReplaceable.With("the transaction changed meanwhile (mined, or re-signed by another request): read it again")
	case errors.Is(err, errBumpCap) && errors.As(err, &rpcErr):
		return nil, nil, ErrFeeCap.With(rpcErr.Message)
	case errors.Is(err, errBumpCap):
		return nil, nil, ErrFeeCap.With(err.Error())
	case err != nil:
		return nil, nil, err
	}
	// The answer shows the request as stored now (mined already, when the node said so).
	if err := t.db.ReadOne(wctx, func(tx *store.DBTx) error {
		var err error
		rec, err = tx.TxByID(wctx, rec.ID)
		return err
	}); err != nil {
		return nil, nil, err
	}
	return rec, v, nil
}
