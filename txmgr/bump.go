package txmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet/txreq"
)

// Fee bumping, speed-up and cancel. A request (a txs row) whose transaction the chain has
// priced out is signed again at the same nonce with raised fees: by the confirmer when it
// stayed out of every block for wallet.transactions.bump.after (a bump), or at once through
// POST /v1/transactions/{hash}/speedup and /cancel (a zero-value self-transfer). Each such
// version is stored with its bytes (store.TxVersion) before it is broadcast, so a crash
// between the two loses nothing: the confirmer's recovery broadcasts the newest version. The
// request keeps the hash its caller got; whichever version a block takes settles it (mined,
// or cancelled for a cancel), the others count as replaced. docs/signing.md tells the rules.

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

// errBumpCap wraps why an automatic bump cannot go on (a cap, the funds): the request is stuck.
var errBumpCap = errors.New("bump cap reached")

// ReplaceFees are a caller's explicit fees for a speed-up or cancel: MaxFeePerGas and
// MaxPriorityFeePerGas for a type 2 transaction, GasPrice for a legacy one. All nil: by the
// bump rules.
type ReplaceFees struct {
	MaxFeePerGas, MaxPriorityFeePerGas, GasPrice *big.Int
}

func (f *ReplaceFees) explicit() bool {
	return f != nil && (f.MaxFeePerGas != nil || f.MaxPriorityFeePerGas != nil || f.GasPrice != nil)
}

// bumpMetrics are the fee bumping's metrics.
type bumpMetrics struct {
	bumps     *prometheus.CounterVec
	replaced  *prometheus.CounterVec
	stuck     *prometheus.CounterVec
	cancelled *prometheus.CounterVec
	toMined   *prometheus.HistogramVec
	reverted  *prometheus.CounterVec
}

func newBumpMetrics(reg prometheus.Registerer) *bumpMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // not exported: tests and tools without a registry
	}
	f := promauto.With(reg)
	return &bumpMetrics{
		bumps: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_bumps_total",
			Help: "Versions signed after a transaction's original: reason auto (the confirmer's bump), speedup or cancel."}, []string{"chain", "reason"}),
		replaced: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_replaced_total",
			Help: "Transaction versions replaced: another version of the same request was mined."}, []string{"chain"}),
		stuck: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_stuck_total",
			Help: "Transactions that became stuck: the next bump would pass maxFeeCap, a signing rule or the funds."}, []string{"chain"}),
		cancelled: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_cancelled_total",
			Help: "Transactions whose cancel version was mined."}, []string{"chain"}),
		reverted: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_reverted_total",
			Help: "Transactions mined with receipt status 0 (reverted), recorded failed with their revert reason."}, []string{"chain"}),
		toMined: f.NewHistogramVec(prometheus.HistogramOpts{Name: "web3gate_tx_time_to_mined_seconds",
			Help:    "From a transaction's recording (just before its first broadcast) to the block scan that found it mined.",
			Buckets: []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600}}, []string{"chain"}),
	}
}

func chainLabel(id uint64) string { return strconv.FormatUint(id, 10) }

// raise is v raised by bp basis points, rounded up.
func raise(v *big.Int, bp int64) *big.Int {
	r := new(big.Int).Mul(v, big.NewInt(10000+bp))
	r.Add(r, big.NewInt(9999))
	return r.Quo(r, big.NewInt(10000))
}

func maxBig(a, b *big.Int) *big.Int {
	if a == nil {
		return b
	}
	if b == nil || a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// parseFields is the transaction object stored for a request or a version.
func parseFields(fields []byte, chainID uint64) (*txreq.Request, error) {
	return txreq.ParseFill(append(append([]byte("["), fields...), ']'), chainID)
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

// Versions are rec's versions after its original, oldest first (none read when it has none).
func (t *Manager) Versions(ctx context.Context, rec *store.TxRecord) ([]*store.TxVersion, error) {
	if rec.Versions == 0 {
		return nil, nil
	}
	var vs []*store.TxVersion
	err := t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		vs, err = tx.Versions(ctx, rec.ID)
		return err
	})
	return vs, err
}

// newFees computes the fees of the next version of a request whose highest fees so far are
// in hi (a request of its type), for the chain's base fee (nil before London): tip and fee cap
// (or gasPrice) each raised by the replacement rule, the fee cap at least twice the base fee
// plus the tip (as filling computes it). Above maxFeeCap the fee cap is held at the cap when
// the replacement rule allows that and the base fee does not exceed it; else errBumpCap.
func newFees(hi *txreq.Request, baseFee *big.Int, br bumpRules) (*ReplaceFees, error) {
	if hi.Type() == types.DynamicFeeTxType {
		tip := raise(hi.MaxPriorityFeePerGas, br.basisPoints)
		minCap := raise(hi.MaxFeePerGas, br.basisPoints)
		feeCap := minCap
		if baseFee != nil {
			feeCap = maxBig(feeCap, new(big.Int).Add(new(big.Int).Mul(baseFee, big.NewInt(2)), tip))
		}
		if br.maxFeeCap != nil && feeCap.Cmp(br.maxFeeCap) > 0 {
			if minCap.Cmp(br.maxFeeCap) > 0 || tip.Cmp(br.maxFeeCap) > 0 {
				return nil, fmt.Errorf("%w: the next bump needs maxFeePerGas %s, above maxFeeCap %s", errBumpCap, minCap, br.maxFeeCap)
			}
			if baseFee != nil && br.maxFeeCap.Cmp(new(big.Int).Add(baseFee, tip)) < 0 {
				return nil, fmt.Errorf("%w: the base fee %s and tip %s need more than maxFeeCap %s", errBumpCap, baseFee, tip, br.maxFeeCap)
			}
			feeCap = br.maxFeeCap
		}
		return &ReplaceFees{MaxFeePerGas: feeCap, MaxPriorityFeePerGas: tip}, nil
	}
	minPrice := raise(hi.GasPrice, br.basisPoints)
	price := minPrice
	if baseFee != nil {
		price = maxBig(price, new(big.Int).Mul(baseFee, big.NewInt(2)))
	}
	if br.maxFeeCap != nil && price.Cmp(br.maxFeeCap) > 0 {
		if minPrice.Cmp(br.maxFeeCap) > 0 || baseFee != nil && br.maxFeeCap.Cmp(baseFee) < 0 {
			return nil, fmt.Errorf("%w: the next bump needs gasPrice %s, above maxFeeCap %s", errBumpCap, maxBig(minPrice, baseFee), br.maxFeeCap)
		}
		price = br.maxFeeCap
	}
	return &ReplaceFees{GasPrice: price}, nil
}

// checkExplicit checks a caller's fees against the replacement rule over hi and the caps.
func checkExplicit(f *ReplaceFees, hi *txreq.Request, br bumpRules) error {
	pct := fmt.Sprintf("%g %%", float64(br.basisPoints)/100)
	if hi.Type() == types.DynamicFeeTxType {
		if f.GasPrice != nil || f.MaxFeePerGas == nil || f.MaxPriorityFeePerGas == nil {
			return ErrReplacementUnderpriced.With("the transaction is of type 2: give maxFeePerGas and maxPriorityFeePerGas (or no fees, for the bump rules)")
		}
		minTip, minCap := raise(hi.MaxPriorityFeePerGas, br.basisPoints), raise(hi.MaxFeePerGas, br.basisPoints)
		if f.MaxPriorityFeePerGas.Cmp(minTip) < 0 || f.MaxFeePerGas.Cmp(minCap) < 0 {
			return ErrReplacementUnderpriced.Withf("fees below the replacement rule (+%s over the highest version): maxFeePerGas must be at least %s and maxPriorityFeePerGas at least %s",
				pct, hexutil.EncodeBig(minCap), hexutil.EncodeBig(minTip))
		}
		if f.MaxPriorityFeePerGas.Cmp(f.MaxFeePerGas) > 0 {
			return ErrReplacementUnderpriced.With("maxPriorityFeePerGas must not exceed maxFeePerGas")
		}
		if br.maxFeeCap != nil && f.MaxFeePerGas.Cmp(br.maxFeeCap) > 0 {
			return ErrFeeCap.Withf("maxFeePerGas %s is above wallet.transactions.bump.maxFeeCap %s", hexutil.EncodeBig(f.MaxFeePerGas), hexutil.EncodeBig(br.maxFeeCap))
		}
		return nil
	}
	if f.GasPrice == nil || f.MaxFeePerGas != nil || f.MaxPriorityFeePerGas != nil {
		return ErrReplacementUnderpriced.With("the transaction is a legacy one: give gasPrice (or no fees, for the bump rules)")
	}
	if minPrice := raise(hi.GasPrice, br.basisPoints); f.GasPrice.Cmp(minPrice) < 0 {
		return ErrReplacementUnderpriced.Withf("fees below the replacement rule (+%s over the highest version): gasPrice must be at least %s", pct, hexutil.EncodeBig(minPrice))
	}
	if br.maxFeeCap != nil && f.GasPrice.Cmp(br.maxFeeCap) > 0 {
		return ErrFeeCap.Withf("gasPrice %s is above wallet.transactions.bump.maxFeeCap %s", hexutil.EncodeBig(f.GasPrice), hexutil.EncodeBig(br.maxFeeCap))
	}
	return nil
}

// highest is the original request of rec with the highest tip and fee cap (or gasPrice) of
// any of its versions.
func highest(rec *store.TxRecord, vs []*store.TxVersion) (*txreq.Request, error) {
	orig, err := parseFields(rec.Fields, rec.ChainID)
	if err != nil {
		return nil, fmt.Errorf("stored fields of tx %d: %w", rec.ID, err)
	}
	hi := *orig
	for _, v := range vs {
		r, err := parseFields(v.Fields, rec.ChainID)
		if err != nil {
			return nil, fmt.Errorf("stored fields of tx %d version %d: %w", rec.ID, v.Seq, err)
		}
		hi.GasPrice = maxBig(hi.GasPrice, r.GasPrice)
		hi.MaxFeePerGas = maxBig(hi.MaxFeePerGas, r.MaxFeePerGas)
		hi.MaxPriorityFeePerGas = maxBig(hi.MaxPriorityFeePerGas, r.MaxPriorityFeePerGas)
	}
	return &hi, nil
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
	signed, err := t.keys.SignTx(rec.Address, next.Tx(rec.Nonce, chainID), chainID)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	raw, err := signed.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	v := &store.TxVersion{Kind: kind, Fields: fields, MaxCost: cost, Raw: raw, Hash: signed.Hash()}
	stored := *rec
	if err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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
	if err := t.db.ReadOne(ctx, func(tx *store.Tx) error {
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
				if werr := t.db.WriteGrouped(ctx, func(tx *store.Tx) error { return tx.SetVersionBroadcast(ctx, v.TxID, v.Seq) }); werr == nil {
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
		err = t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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

// countSettled counts the metrics of rec settled by the version with hash mined.
func (t *Manager) countSettled(rec *store.TxRecord, vs []*store.TxVersion, mined common.Hash) {
	label := chainLabel(rec.ChainID)
	if len(vs) > 0 {
		t.metrics.replaced.WithLabelValues(label).Add(float64(len(vs)))
	}
	for _, v := range vs {
		if v.Hash == mined && v.Kind == store.VersionCancel {
			t.metrics.cancelled.WithLabelValues(label).Inc()
		}
	}
}

// observeMined counts the requests the block scan found mined.
func (t *Manager) observeMined(chainID uint64, mined []store.Mined) {
	if len(mined) == 0 {
		return
	}
	label := chainLabel(chainID)
	now := time.Now()
	for _, m := range mined {
		t.metrics.toMined.WithLabelValues(label).Observe(now.Sub(m.CreatedAt).Seconds())
		if m.Versions > 0 {
			t.metrics.replaced.WithLabelValues(label).Add(float64(m.Versions))
		}
		if m.State == store.StateCancelled {
			t.metrics.cancelled.WithLabelValues(label).Inc()
		}
	}
}

// markStuck moves rec to stuck (logged and counted once, at the change).
func (t *Manager) markStuck(ctx context.Context, rec *store.TxRecord, why error) {
	if rec.State == store.StateStuck {
		return
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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

func (t *Manager) bumpRules(chainID uint64) bumpRules {
	if br, ok := t.bumps[chainID]; ok {
		return br
	}
	return t.cfg.Bump.forChain(chainID)
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
	if err := t.db.ReadOne(wctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.TxByID(wctx, rec.ID)
		return err
	}); err != nil {
		return nil, nil, err
	}
	return rec, v, nil
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
	if err := c.t.db.Read(ctx, func(tx *store.Tx) error {
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
	_ = c.t.db.WriteGrouped(ctx, func(tx *store.Tx) error { return tx.Touch(ctx, rec.ID) })
}
