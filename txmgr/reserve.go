package txmgr

// Nonce reservation: the next nonce of an account, taken and recorded in one store transaction.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// reservation is what reserve records besides the request.
type reservation struct {
	principal, kind, idemKey string
	feeBump                  string   // the X-Fee-Bump choice, "" when none
	fields                   []byte   // the complete request, canonical JSON
	request                  []byte   // the request as sent, when fields differ from it
	filled                   []string // the fields filled in
	balance                  *big.Int // the balance check read
	// handOut: an eth_signTransaction, signed inside the reservation's transaction when
	// its key is unlocked in memory (signInside).
	handOut bool
}

// errInFlightFull: the account's in-flight cap is reached (reserve reserved nothing).
var errInFlightFull = errors.New("in-flight cap reached")

// reserve takes the next nonce of r.From on chainID and records the transaction, in one store
// transaction: the lowest released slot, else the nonce head, initialised on first use from
// max(the chain's pending nonce, the highest stored nonce + 1). A nonce the client gave must
// be that one (-32000 nonce too low / too high, nothing reserved). The in-flight cap
// (errInFlightFull) and funds are checked inside the same transaction.
func (t *Manager) reserve(ctx context.Context, ch Chain, chainID uint64, r *txreq.Request, res reservation) (*store.TxRecord, error) {
	hk := headKey{chainID, r.From}
	_, known := t.heads.Load(hk)
	if !known {
		if err := t.db.Read(ctx, func(tx *store.DBTx) error {
			var err error
			_, known, err = tx.NextNonce(ctx, chainID, r.From)
			return err
		}); err != nil {
			return nil, err
		}
	}
	var chainNonce uint64
	if !known {
		n, err := t.nonceAt(ctx, ch, r.From, "pending")
		if err != nil {
			return nil, err
		}
		chainNonce = n
	}
	cost := r.MaxCost()
	rec := &store.TxRecord{
		ChainID: chainID, Address: r.From, Principal: res.principal, Kind: res.kind, State: store.StateReserved,
		Fields: res.fields, Request: res.request, Filled: res.filled, MaxCost: cost, IdempotencyKey: res.idemKey,
		FeeBump: res.feeBump,
	}
	if t.groupReservations {
		op := &reserveOp{r: r, res: res, rec: rec, chainNonce: chainNonce, readChain: !known}
		if err := t.reserveInGroup(ctx, hk, op); err != nil {
			return nil, err
		}
		t.heads.Store(hk, struct{}{})
		return rec, nil
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		// What follows reads the nonce state, then writes on it: another reservation of the
		// account (in this process or another replica on the same database) waits until
		// this one commits, and then reads what it wrote.
		if err := tx.LockAccount(ctx, chainID, r.From); err != nil {
			return err
		}
		next, ok, err := tx.NextNonce(ctx, chainID, r.From)
		if err != nil {
			return err
		}
		if !ok {
			next = chainNonce
			if maxStored, has, err := tx.MaxStoredNonce(ctx, chainID, r.From); err != nil {
				return err
			} else if has && maxStored+1 > next {
				next = maxStored + 1
			}
		}
		nonce, err := lowestFree(ctx, tx, chainID, r.From, next)
		if err != nil {
			return err
		}
		if r.Nonce != nil && *r.Nonce != nonce {
			return nonceError(*r.Nonce, nonce)
		}
		n, inflight, err := tx.InFlight(ctx, chainID, r.From)
		if err != nil {
			return err
		}
		if n >= t.cfg.MaxInFlight {
			return errInFlightFull
		}
		if err := funded(res.balance, cost, n, inflight); err != nil {
			return err
		}
		if nonce == next {
			if err := tx.RaiseNextNonce(ctx, chainID, r.From, next+1); err != nil {
				return err
			}
		}
		rec.Nonce = nonce
		if res.handOut {
			if err := t.signInside(r, rec); err != nil {
				return err
			}
		}
		return tx.InsertTx(ctx, rec)
	})
	if err != nil {
		return nil, err
	}
	t.heads.Store(hk, struct{}{}) // heads are never deleted
	return rec, nil
}

// errSignedInside wraps the failure of a signature made inside a reservation (signInside):
// nothing was reserved.
type errSignedInside struct{ err error }

func (e errSignedInside) Error() string { return e.err.Error() }
func (e errSignedInside) Unwrap() error { return e.err }

// signInside signs the transaction of rec, an eth_signTransaction whose nonce was just
// chosen, inside the store transaction that reserves it, when its key is unlocked in this
// process's memory, and makes rec a hand-out (state handed_out, its bytes, hash and expiry):
// the row is written once and the call waits for one commit instead of two (the reservation,
// then the signed bytes). The signature takes some 50 µs of CPU and never waits. A key that
// is elsewhere (not unlocked yet, an HSM, a KMS) may wait, so rec stays reserved and is
// signed after the commit (signTransaction). Only hand-outs are signed here: a send's
// signed bytes must be stored before its broadcast, which this one commit would do as well,
// but it has not been tried or measured for sends.
func (t *Manager) signInside(r *txreq.Request, rec *store.TxRecord) error {
	chainID := new(big.Int).SetUint64(rec.ChainID)
	signed, ok, err := t.keys.SignTxUnlocked(rec.Address, r.Tx(rec.Nonce, chainID), chainID)
	if !ok {
		return nil
	}
	if err != nil {
		return errSignedInside{fmt.Errorf("sign: %w", err)}
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return errSignedInside{fmt.Errorf("encode: %w", err)}
	}
	rec.Raw, rec.Hash, rec.State = raw, signed.Hash(), store.StateHandedOut
	rec.ExpiresAt = time.Now().Add(t.cfg.HandOutTTL)
	return nil
}

// ErrNonce is the -32000 answer to a client's nonce that is not the account's next one.
var ErrNonce = &jsonrpc.Error{Code: -32000, Message: "nonce too low", HTTPStatus: http.StatusOK}

// nonceError is the answer to a client's nonce given when next is the one web3gate hands out
// next, in a node's words.
func nonceError(given, next uint64) error {
	if given < next {
		return ErrNonce.Withf("nonce too low: next nonce is %d, tx nonce %d", next, given)
	}
	return ErrNonce.Withf("nonce too high: next nonce is %d, tx nonce %d", next, given)
}

// PendingNonce is the nonce the next transaction of addr on chainID gets from web3gate:
// eth_getTransactionCount(addr, "pending") as web3gate's nonce state has it (reservations and
// handed-out nonces counted, a released slot offered first). nil when web3gate does not hold
// addr or has no nonce state for it yet: the node's answer is then the same.
func (t *Manager) PendingNonce(ctx context.Context, chainID uint64, addr common.Address) (*uint64, error) {
	if _, ok := t.chains[chainID]; !ok || !t.keys.Has(addr) || !t.genesisGate(chainID).done.Load() {
		return nil, nil // the node's answer (before the genesis check, the stored state may be an earlier chain's)
	}
	var next uint64
	var ok bool
	err := t.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		if next, ok, err = tx.NextNonce(ctx, chainID, addr); err != nil || !ok {
			return err
		}
		next, err = lowestFree(ctx, tx, chainID, addr, next)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return &next, nil
}

// lowestFree is the nonce the next reservation of addr takes, given its nonce head next: the
// lowest released slot below it, else next.
func lowestFree(ctx context.Context, tx *store.DBTx, chainID uint64, addr common.Address, next uint64) (uint64, error) {
	slot, ok, err := tx.ReusableSlot(ctx, chainID, addr, 0)
	if err != nil || !ok || slot >= next {
		return next, err
	}
	return slot, nil
}

// headKey names a nonce head.
type headKey struct {
	chainID uint64
	addr    common.Address
}
