package txmgr

// Versions of a request at one nonce: signed, stored, broadcast, and settled by the one mined.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// parseFields is the transaction object stored for a request or a version.
func parseFields(fields []byte, chainID uint64) (*txreq.Request, error) {
	return txreq.ParseFill(append(append([]byte("["), fields...), ']'), chainID)
}

// Versions are rec's versions after its original, oldest first (none read when it has none).
func (t *Manager) Versions(ctx context.Context, rec *store.TxRecord) ([]*store.TxVersion, error) {
	if rec.Versions == 0 {
		return nil, nil
	}
	var vs []*store.TxVersion
	err := t.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		vs, err = tx.Versions(ctx, rec.ID)
		return err
	})
	return vs, err
}

// signVersion signs, stores and broadcasts the next version of rec (kind bump, speedup or
// cancel) with fees (explicit), or fees by the bump rules for the chain's base fee. rec is
// updated to the stored request. A version the node refuses as underpriced, or that no node
// accepted yet, stays stored as signed: the confirmer sends it again.
func (t *Manager) signVersion(ctx context.Context, ch Chain, rec *store.TxRecord, kind string, fees *ReplaceFees, baseFee *big.Int) (*store.TxVersion, error) {
	br := t.bumpRules(rec.ChainID)
	vs, err := t.Versions(ctx, rec)
	if err != nil {
		return nil, err
	}
	hi, err := highest(rec, vs)
	if err != nil {
		return nil, err
	}
	if fees.explicit() {
		if err := checkExplicit(fees, hi, br); err != nil {
			return nil, err
		}
	} else if fees, err = newFees(hi, baseFee, br); err != nil {
		return nil, err
	}
	orig, _ := parseFields(rec.Fields, rec.ChainID) // parsed by highest already
	next := *orig
	next.Nonce, next.Missing, next.Filled = nil, 0, 0
	next.GasPrice, next.MaxFeePerGas, next.MaxPriorityFeePerGas = fees.GasPrice, fees.MaxFeePerGas, fees.MaxPriorityFeePerGas
	if kind == store.VersionCancel {
		to := rec.Address
		next.To, next.Value, next.Data, next.Gas, next.AccessList = &to, new(big.Int), []byte{}, fillerGas, nil
	} else if err := t.checkRules(&next); err != nil {
		// A cancel moves nothing: like a gap filler, it is not the rules' business.
		return nil, fmt.Errorf("%w: %w", errBumpCap, err)
	}
	cost := next.MaxCost()
	if extra := new(big.Int).Sub(cost, rec.MaxCost); extra.Sign() > 0 {
		if err := t.fundedBump(ctx, ch, rec, extra); err != nil {
			return nil, err
		}
	}
	fields, err := json.Marshal(&next)
	if err != nil {
		return nil, err
	}
	chainID := new(big.Int).SetUint64(rec.ChainID)
	signed, err := t.keys.SignTx(ctx, rec.Address, next.Tx(rec.Nonce, chainID), chainID)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	v := &store.TxVersion{Kind: kind, Fields: fields, MaxCost: cost, Raw: raw, Hash: signed.Hash()}
	stored := *rec
	if err := t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
		cp := stored
		if err := tx.AddVersion(ctx, &cp, v); err != nil {
			return err
		}
		stored = cp
		return nil
	}); err != nil {
		// Not stored: the bytes are dropped here, never sent.
		return nil, err
	}
	*rec = stored
	reason := kind
	if kind == store.VersionBump {
		reason = "auto"
	}
	t.metrics.bumps.WithLabelValues(chainLabel(rec.ChainID), reason).Inc()
	t.log.Info("transaction re-signed", zap.Uint64("chain", rec.ChainID), zap.String("from", rec.Address.Hex()),
		zap.Uint64("nonce", rec.Nonce), zap.String("kind", kind), zap.String("hash", rec.Hash.Hex()),
		zap.String("version", v.Hash.Hex()), zap.Int("seq", v.Seq))
	t.broadcastVersion(ctx, ch, rec, v)
	return v, nil
}

// fundedBump: the balance covers the account's in-flight costs with rec's raised by extra.
func (t *Manager) fundedBump(ctx context.Context, ch Chain, rec *store.TxRecord, extra *big.Int) error {
	balance, err := t.balance(ctx, ch, rec.Address)
	if err != nil {
		return err
	}
	var n int
	var inflight *big.Int
	if err := t.db.ReadOne(ctx, func(tx *store.DBTx) error {
		var err error
		n, inflight, err = tx.InFlight(ctx, rec.ChainID, rec.Address)
		return err
	}); err != nil {
		return err
	}
	if err := funded(balance, extra, n, inflight); err != nil {
		return fmt.Errorf("%w: %w", errBumpCap, err)
	}
	return nil
}

// broadcastVersion sends v's bytes until a node takes them (or knows them), refuses them as
// underpriced (an earlier version is in its pool: v stays signed), says the nonce is used (a
// version was mined: recorded), or ctx ends.
func (t *Manager) broadcastVersion(ctx context.Context, ch Chain, rec *store.TxRecord, v *store.TxVersion) {
	logger := t.log.With(zap.Uint64("chain", rec.ChainID), zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce),
		zap.String("version", v.Hash.Hex()))
	params := []byte(`["` + hexutil.Encode(v.Raw) + `"]`)
	for {
		_, err := ch.Forward(ctx, "eth_sendRawTransaction", params)
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil || errors.As(err, &rpcErr) && isAlreadyKnown(rpcErr.Message):
			if v.State != store.VersionBroadcast {
				if werr := t.db.WriteGrouped(ctx, func(tx *store.DBTx) error { return tx.SetVersionBroadcast(ctx, v.TxID, v.Seq) }); werr == nil {
					v.State = store.VersionBroadcast
				}
			}
			return
		case errors.As(err, &rpcErr) && isUnderpriced(rpcErr.Message):
			logger.Info("replacement refused as underpriced by the node; the next bump goes higher", zap.String("node", rpcErr.Message))
			return
		case errors.As(err, &rpcErr) && isNonceTooLow(rpcErr.Message):
			// A version of this nonce is in a block: find which.
			if _, err := t.settle(ctx, ch, rec); err != nil {
				logger.Warn("looking for the mined version failed", zap.Error(err))
			}
			return
		case errors.Is(err, jsonrpc.ErrUpstreamUnavailable) || errors.Is(err, jsonrpc.ErrUpstreamTimeout) || !errors.As(err, &rpcErr):
			select {
			case <-ctx.Done():
				logger.Warn("version not accepted by a node yet; the confirmer sends it again", zap.Error(err))
				return
			case <-time.After(broadcastRetry):
			}
		default:
			// The node refused this version itself (funds, gas): the earlier ones stay valid.
			logger.Warn("a node refused a replacement", zap.String("node", rpcErr.Message))
			return
		}
	}
}

func containsFold(s, sub string) bool { return strings.Contains(strings.ToLower(s), sub) }

func isUnderpriced(msg string) bool {
	return containsFold(msg, "replacement transaction underpriced") || containsFold(msg, "replacement underpriced") ||
		containsFold(msg, "replacementnotallowed") || containsFold(msg, "insufficient gas price to replace")
}

// settle looks for a receipt of any hash of rec (the original and every version) and records
// the one found; it reports whether one was.
func (t *Manager) settle(ctx context.Context, ch Chain, rec *store.TxRecord) (bool, error) {
	hashes := []common.Hash{}
	if rec.HasHash() {
		hashes = append(hashes, rec.Hash)
	}
	vs, err := t.Versions(ctx, rec)
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		hashes = append(hashes, v.Hash)
	}
	for i, h := range hashes {
		m, err := t.receipt(ctx, ch, h)
		if err != nil {
			return false, err
		}
		if m == nil {
			continue
		}
		isVersion := i > 0 || !rec.HasHash()
		err = t.db.WriteGrouped(ctx, func(tx *store.DBTx) error {
			var err error
			if isVersion {
				_, err = tx.SetMinedVersion(ctx, rec.ChainID, h, m.number, m.hash)
			} else {
				_, err = tx.SetMined(ctx, rec.ChainID, h, m.number, m.hash)
			}
			return err
		})
		if err != nil {
			return false, err
		}
		t.countSettled(rec, vs, h)
		return true, nil
	}
	return false, nil
}

// rebroadcastVersions handles a signed, broadcast or stuck request with versions at the
// confirmer's recovery and rebroadcast: mined already (any hash), else its newest version
// is sent again (the one stored but never broadcast, after a crash).
func (c *confirmer) rebroadcastVersions(ctx context.Context, rec *store.TxRecord) {
	logger := c.log.With(zap.Int64("tx", rec.ID), zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce))
	mined, err := c.t.settle(ctx, c.ch, rec)
	if err != nil {
		logger.Warn("confirmer: receipt lookup failed", zap.Error(err))
		return
	}
	if !mined {
		vs, err := c.t.Versions(ctx, rec)
		if err != nil || len(vs) == 0 {
			logger.Warn("confirmer: reading versions failed", zap.Error(err))
			return
		}
		newest := vs[len(vs)-1]
		if newest.State == store.VersionSigned {
			logger.Info("confirmer: broadcasting a stored version", zap.String("version", newest.Hash.Hex()))
		}
		c.t.broadcastVersion(ctx, c.ch, rec, newest)
	}
	_ = c.t.db.WriteGrouped(ctx, func(tx *store.DBTx) error { return tx.Touch(ctx, rec.ID) })
}
