package txmgr

// The entry points of a send: Send, SendWith, SignTransaction, and the check-and-reserve loop.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// Errors of the transaction methods, as the API reference lists them.
var (
	// ErrInsufficientFunds: balance < gas * price + value + the in-flight transactions' costs.
	ErrInsufficientFunds = &jsonrpc.Error{Code: -32000, Message: "insufficient funds for gas * price + value", HTTPStatus: http.StatusOK}
	// ErrUnderpriced: the fee is below what the chain's latest block requires.
	ErrUnderpriced = &jsonrpc.Error{Code: -32000, Message: "transaction underpriced", HTTPStatus: http.StatusOK}
	// ErrRule: a per-account signing rule refuses the transaction.
	ErrRule = &jsonrpc.Error{Code: -32003, Message: "transaction rejected by a signing rule", HTTPStatus: http.StatusOK}
	// ErrIdempotencyMismatch: an Idempotency-Key reused with a different transaction.
	ErrIdempotencyMismatch = jsonrpc.ErrInvalidParams.With("Idempotency-Key was used with a different transaction")
)

// Send is eth_sendTransaction: r, already parsed and held for principal, is completed (the
// fields its client left out, fill.go), checked, given the next nonce of its sender (or its
// own, when it is that one), signed, persisted and broadcast; the hash is returned once a
// node accepted the bytes. With an idempotency key, a second Send with the same key and
// transaction returns the first one's hash and sends nothing.
func (t *Manager) Send(ctx context.Context, principal string, chainID uint64, r *txreq.Request, idemKey string) (common.Hash, error) {
	return t.SendWith(ctx, principal, chainID, r, SendOptions{IdempotencyKey: idemKey})
}

// SendOptions are what an eth_sendTransaction request says besides the transaction.
type SendOptions struct {
	IdempotencyKey string
	// FeeBump is the X-Fee-Bump header: store.FeeBumpAllow lets the confirmer bump fees the
	// caller set, store.FeeBumpDeny keeps it from bumping at all; "" follows the
	// configuration (bump.callerPriced). Recorded with the transaction.
	FeeBump string
}

// SendWith is Send with the request's options.
func (t *Manager) SendWith(ctx context.Context, principal string, chainID uint64, r *txreq.Request, opts SendOptions) (common.Hash, error) {
	if t.tracer != nil {
		if tctx, span := tracing.Start(ctx, t.tracer, "txmgr.send"); span != nil {
			span.SetAttributes(attribute.Int64("web3gate.chain_id", int64(chainID)),
				attribute.Bool("web3gate.tx.idempotency_key", opts.IdempotencyKey != ""))
			hash, err := t.sendWith(tctx, principal, chainID, r, opts)
			if err == nil {
				span.SetAttributes(attribute.String("web3gate.tx.hash", hash.Hex()))
			}
			tracing.End(span, err)
			return hash, err
		}
	}
	return t.sendWith(ctx, principal, chainID, r, opts)
}

// sendWith is SendWith without its span.
func (t *Manager) sendWith(ctx context.Context, principal string, chainID uint64, r *txreq.Request, opts SendOptions) (common.Hash, error) {
	idemKey := opts.IdempotencyKey
	ch, err := t.chain(ctx, chainID)
	if err != nil {
		return common.Hash{}, err
	}
	request, err := json.Marshal(r)
	if err != nil {
		return common.Hash{}, err
	}
	if idemKey != "" {
		if rec, err := t.byIdempotencyKey(ctx, principal, idemKey); err == nil {
			return t.awaitIdempotent(ctx, rec, request)
		} else if !errors.Is(err, store.ErrNotFound) {
			return common.Hash{}, err
		}
	}
	for attempt := 0; ; attempt++ {
		rec, err := t.prepareAndReserve(ctx, ch, principal, chainID, r, request, store.KindSend, idemKey, opts.FeeBump)
		if errors.Is(err, store.ErrExists) && idemKey != "" {
			// The same key, reserved concurrently: answer with that transaction.
			rec, lerr := t.byIdempotencyKey(ctx, principal, idemKey)
			if lerr != nil {
				return common.Hash{}, lerr
			}
			return t.awaitIdempotent(ctx, rec, request)
		}
		if err != nil {
			return common.Hash{}, err
		}
		// The nonce is taken: from here on the work finishes, or is left for the confirmer to
		// finish, whatever happens to the caller's context.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.BroadcastTimeout)
		hash, retry, err := t.complete(wctx, ch, rec, r)
		cancel()
		if retry && r.Nonce != nil {
			// The client's own nonce was used outside web3gate: its request cannot be met.
			next, nerr := t.PendingNonce(ctx, chainID, r.From)
			if nerr != nil || next == nil {
				return common.Hash{}, err
			}
			return common.Hash{}, nonceError(*r.Nonce, *next)
		}
		if retry && attempt < 2 {
			continue // the nonce was used outside web3gate and nothing was sent: a new nonce
		}
		if err == nil {
			t.log.Info("transaction sent", proxy.RequestIDField(ctx), zap.Int64("tx", rec.ID),
				zap.Uint64("chain", chainID), zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce),
				zap.Stringer("hash", hash))
		}
		return hash, err
	}
}

// SignTransaction is eth_signTransaction: the same completion, checks and reservation as Send,
// then the signed bytes are persisted with the nonce "handed out" to the caller, who submits
// them.
func (t *Manager) SignTransaction(ctx context.Context, principal string, chainID uint64, r *txreq.Request) ([]byte, error) {
	if t.tracer != nil {
		if tctx, span := tracing.Start(ctx, t.tracer, "txmgr.sign_transaction"); span != nil {
			span.SetAttributes(attribute.Int64("web3gate.chain_id", int64(chainID)))
			raw, err := t.signTransaction(tctx, principal, chainID, r)
			tracing.End(span, err)
			return raw, err
		}
	}
	return t.signTransaction(ctx, principal, chainID, r)
}

// signTransaction is SignTransaction without its span.
func (t *Manager) signTransaction(ctx context.Context, principal string, chainID uint64, r *txreq.Request) ([]byte, error) {
	ch, err := t.chain(ctx, chainID)
	if err != nil {
		return nil, err
	}
	request, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	rec, err := t.prepareAndReserve(ctx, ch, principal, chainID, r, request, store.KindSign, "", "")
	var inside errSignedInside
	if errors.As(err, &inside) {
		// Signed inside the reservation, and failed: nothing was reserved.
		t.log.Warn("signing failed", proxy.RequestIDField(ctx), zap.Uint64("chain", chainID), zap.String("from", r.From.Hex()),
			zap.String("kind", store.KindSign), zap.Error(inside.err))
		return nil, SigningError(inside.err)
	}
	if err != nil {
		return nil, err
	}
	if rec.State == store.StateHandedOut {
		return rec.Raw, nil // signed inside the reservation (signInside)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.BroadcastTimeout)
	defer cancel()
	_, span := t.startSpan(wctx, "txmgr.sign", rec)
	raw, hash, err := t.signRecord(wctx, rec, r)
	tracing.End(span, err)
	if err != nil {
		t.signFailed(wctx, rec, err)
		t.giveUp(wctx, ch, rec, err.Error())
		return nil, SigningError(err)
	}
	expires := time.Now().Add(t.cfg.HandOutTTL)
	pctx, span := t.startSpan(wctx, "txmgr.persist", rec)
	err = t.db.WriteOne(pctx, func(tx *store.DBTx) error {
		return tx.SetHandedOut(pctx, rec.ID, raw, hash, expires)
	})
	tracing.End(span, err)
	if err != nil {
		// Not handed out: the confirmer releases the reserved slot (kind sign is never sent).
		return nil, t.notStored(wctx, rec, err, "it is not handed out; retry")
	}
	return raw, nil
}

// prepareAndReserve completes r (once: a retry finds it complete, r.Filled saying what was
// filled), checks it against the chain and reserves its nonce. A send that finds its account's
// in-flight cap reached waits for a slot (awaitSlot) and is checked again, since the
// balance it was checked against may have been spent meanwhile.
func (t *Manager) prepareAndReserve(ctx context.Context, ch Chain, principal string, chainID uint64, r *txreq.Request,
	request []byte, kind, idemKey, feeBump string) (*store.TxRecord, error) {
	var deadline time.Time
	var waiting *atomic.Int32
	defer func() {
		if waiting != nil {
			waiting.Add(-1)
		}
	}()
	for {
		balance, err := t.fillAndCheck(ctx, ch, chainID, r)
		if err != nil {
			return nil, err
		}
		fields, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		res := reservation{principal: principal, kind: kind, idemKey: idemKey, feeBump: feeBump, fields: fields, filled: r.Filled.Names(), balance: balance,
			handOut: kind == store.KindSign}
		if string(fields) != string(request) {
			res.request = request
		}
		rctx, span := t.startSpan(ctx, "txmgr.reserve", nil)
		rec, err := t.reserve(rctx, ch, chainID, r, res)
		if span != nil && err == nil {
			recordTx(span, rec)
		}
		tracing.End(span, err)
		if !errors.Is(err, errInFlightFull) {
			return rec, err
		}
		if waiting == nil {
			waiting = t.queue(headKey{chainID, r.From})
			if waiting.Add(1) > int32(t.cfg.MaxQueued) {
				return nil, inFlightError(r.From, chainID, t.cfg.MaxInFlight, "and the queue of sends waiting for a slot is full")
			}
			deadline = time.Now().Add(t.cfg.InFlightWait)
		}
		// Wait until a slot is free by the store's count (a local read), before the checks
		// that read the chain again: a queue of waiting sends must not ask the node for a
		// balance each time the confirmer makes a pass.
		for {
			if err := t.awaitSlot(ctx, chainID, deadline); err != nil {
				return nil, inFlightError(r.From, chainID, t.cfg.MaxInFlight, fmt.Sprintf("and none left flight within inFlightWait (%s)", t.cfg.InFlightWait))
			}
			if n, err := t.inFlight(ctx, chainID, r.From); err != nil || n < t.cfg.MaxInFlight {
				break
			}
		}
	}
}

// fillAndCheck completes r (the fields its client left out) from the latest block and checks
// it against the chain, returning the balance it read.
func (t *Manager) fillAndCheck(ctx context.Context, ch Chain, chainID uint64, r *txreq.Request) (balance *big.Int, err error) {
	ctx, span := t.startSpan(ctx, "txmgr.check", nil)
	defer func() { tracing.End(span, err) }()
	b, reused, err := t.latestBlock(ctx, ch, chainID)
	if err != nil {
		return nil, err
	}
	if err := t.fillIn(ctx, ch, b, r); err != nil {
		return nil, err
	}
	balance, err = t.check(ctx, ch, chainID, b, r)
	if errors.Is(err, ErrUnderpriced) && reused {
		// The head may have moved since b was read (the pool learns of new heads at its
		// polls, and a dev chain seals a block per send): read it again before refusing.
		if b, err = t.readLatestBlock(ctx, ch, chainID); err == nil {
			balance, err = t.check(ctx, ch, chainID, b, r)
		}
	}
	return balance, err
}

// inFlight is the number of transactions of addr in flight on chainID.
func (t *Manager) inFlight(ctx context.Context, chainID uint64, addr common.Address) (int, error) {
	var n int
	err := t.db.ReadOne(ctx, func(tx *store.DBTx) error {
		var err error
		n, _, err = tx.InFlight(ctx, chainID, addr)
		return err
	})
	return n, err
}

// inFlightError is the -32005 answer of a send that could not get a slot.
func inFlightError(from common.Address, chainID uint64, max int, why string) error {
	return jsonrpc.ErrLimitExceeded.Withf("limit exceeded: account %s has %d transactions in flight on chain %d (maxInFlight %d) %s",
		from.Hex(), max, chainID, max, why)
}
