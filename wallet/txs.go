package wallet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet/txreq"
)

// The nonce manager: eth_sendTransaction and eth_signTransaction for the accounts the service
// holds. docs/signing.md describes the states of a transaction and why each step is where it
// is; in short:
//
//  1. check the request against the chain (gas, base fee, funds) and the signing rules;
//  2. reserve the nonce and record the transaction in one store transaction (group-committed
//     with other reservations), re-checking funds and the in-flight cap inside it;
//  3. sign outside any lock, persist the signed bytes (group-committed), and only then
//  4. broadcast, and answer with the hash once a node accepted the bytes.
//
// A confirmer per chain (confirmer.go) follows blocks, moves transactions to mined and
// confirmed, handles reorgs, rebroadcasts, expires handed-out nonces, and on start recovers
// whatever a crash interrupted.

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

// Chain is one chain as the nonce manager uses it: JSON-RPC calls through the upstream pool.
type Chain interface {
	// Forward sends method(params) and returns the raw JSON result; the error is a
	// *jsonrpc.Error (an upstream's own error passed through, or -32002/-32011).
	Forward(ctx context.Context, method string, params []byte) ([]byte, error)
}

// TxDeps are the nonce manager's collaborators.
type TxDeps struct {
	Keys   *Keys
	DB     *store.DB
	Chains map[uint64]Chain
	Logger *zap.Logger
}

// Transactions signs, sends and tracks the transactions of the accounts the service holds.
type Transactions struct {
	cfg    TxConfig
	rules  map[common.Address]rule
	keys   *Keys
	db     *store.DB
	chains map[uint64]Chain
	log    *zap.Logger

	blocks sync.Map // chain id -> *blockInfo, the latest block seen
	heads  sync.Map // headKey -> struct{}: nonce heads known to exist in the store

	genesis sync.Map // chain id -> *genesisGate: checked before the chain's first nonce (genesis.go)
}

// NewTransactions builds the manager; Run starts its confirmers.
func NewTransactions(cfg TxConfig, deps TxDeps) (*Transactions, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("wallet.transactions: %w", err)
	}
	rules, _ := cfg.rules()
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if deps.Keys == nil || deps.DB == nil {
		return nil, errors.New("wallet: transactions need keys and a store")
	}
	return &Transactions{cfg: cfg, rules: rules, keys: deps.Keys, db: deps.DB, chains: deps.Chains, log: log}, nil
}

func (t *Transactions) chain(ctx context.Context, chainID uint64) (Chain, error) {
	ch, ok := t.chains[chainID]
	if !ok {
		return nil, jsonrpc.ErrUnknownChain.Withf("chain %d is not configured", chainID)
	}
	// No nonce of a chain is handed out before its genesis was checked (genesis.go).
	if err := t.awaitGenesis(ctx, chainID); err != nil {
		return nil, err
	}
	return ch, nil
}

// Send is eth_sendTransaction: r, already parsed and held for principal, is checked, given the
// next nonce of its sender, signed, persisted and broadcast; the hash is returned once a node
// accepted the bytes. With an idempotency key, a second Send with the same key and
// transaction returns the first one's hash and sends nothing.
func (t *Transactions) Send(ctx context.Context, principal string, chainID uint64, r *txreq.Request, idemKey string) (common.Hash, error) {
	ch, err := t.chain(ctx, chainID)
	if err != nil {
		return common.Hash{}, err
	}
	fields, err := json.Marshal(r)
	if err != nil {
		return common.Hash{}, err
	}
	if idemKey != "" {
		if rec, err := t.byIdempotencyKey(ctx, principal, idemKey); err == nil {
			return t.awaitIdempotent(ctx, rec, fields)
		} else if !errors.Is(err, store.ErrNotFound) {
			return common.Hash{}, err
		}
	}
	for attempt := 0; ; attempt++ {
		balance, err := t.check(ctx, ch, chainID, r)
		if err != nil {
			return common.Hash{}, err
		}
		rec, err := t.reserve(ctx, ch, principal, chainID, r, fields, store.KindSend, idemKey, balance)
		if errors.Is(err, store.ErrExists) && idemKey != "" {
			// The same key, reserved concurrently: answer with that transaction.
			rec, lerr := t.byIdempotencyKey(ctx, principal, idemKey)
			if lerr != nil {
				return common.Hash{}, lerr
			}
			return t.awaitIdempotent(ctx, rec, fields)
		}
		if err != nil {
			return common.Hash{}, err
		}
		// The nonce is taken: from here on the work finishes, or is left for the confirmer to
		// finish, whatever happens to the caller's context.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.BroadcastTimeout)
		hash, retry, err := t.complete(wctx, ch, rec, r)
		cancel()
		if retry && attempt < 2 {
			continue // the nonce was used outside web3gate and nothing was sent: a new nonce
		}
		return hash, err
	}
}

// SignTransaction is eth_signTransaction: the same checks and reservation as Send, then the
// signed bytes are persisted with the nonce "handed out" to the caller, who submits them.
func (t *Transactions) SignTransaction(ctx context.Context, principal string, chainID uint64, r *txreq.Request) ([]byte, error) {
	ch, err := t.chain(ctx, chainID)
	if err != nil {
		return nil, err
	}
	fields, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	balance, err := t.check(ctx, ch, chainID, r)
	if err != nil {
		return nil, err
	}
	rec, err := t.reserve(ctx, ch, principal, chainID, r, fields, store.KindSign, "", balance)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.BroadcastTimeout)
	defer cancel()
	raw, hash, err := t.signRecord(rec, r)
	if err != nil {
		t.giveUp(wctx, ch, rec, err.Error())
		return nil, jsonrpc.ErrInternal.With("signing failed")
	}
	expires := time.Now().Add(t.cfg.HandOutTTL)
	err = t.db.WriteGrouped(wctx, func(tx *store.Tx) error {
		return tx.SetHandedOut(wctx, rec.ID, raw, hash, expires)
	})
	if err != nil {
		// Not handed out: the confirmer releases the reserved slot (kind sign is never sent).
		t.log.Error("persisting a signed transaction failed", zap.Uint64("chain", chainID),
			zap.String("from", r.From.Hex()), zap.Uint64("nonce", rec.Nonce), zap.Error(err))
		return nil, jsonrpc.ErrInternal.With("storing the signed transaction failed")
	}
	return raw, nil
}

// blockInfo is what the checks need from the latest block.
type blockInfo struct {
	number   uint64
	gasLimit uint64
	baseFee  *big.Int // nil before London
	at       time.Time
}

// blockInfoMaxAge bounds how long a read latest block is reused for the checks.
const blockInfoMaxAge = 500 * time.Millisecond

func (t *Transactions) latestBlock(ctx context.Context, ch Chain, chainID uint64) (*blockInfo, error) {
	if v, ok := t.blocks.Load(chainID); ok {
		if b := v.(*blockInfo); time.Since(b.at) < blockInfoMaxAge {
			return b, nil
		}
	}
	res, err := ch.Forward(ctx, "eth_getBlockByNumber", []byte(`["latest",false]`))
	if err != nil {
		return nil, err
	}
	var h struct {
		Number   *hexutil.Big `json:"number"`
		GasLimit *hexutil.Big `json:"gasLimit"`
		BaseFee  *hexutil.Big `json:"baseFeePerGas"`
	}
	if err := json.Unmarshal(res, &h); err != nil || h.Number == nil || h.GasLimit == nil {
		return nil, jsonrpc.ErrUpstreamUnavailable.With("the node answered the latest block with something else")
	}
	b := &blockInfo{number: h.Number.ToInt().Uint64(), gasLimit: h.GasLimit.ToInt().Uint64(), baseFee: (*big.Int)(h.BaseFee), at: time.Now()}
	t.blocks.Store(chainID, b)
	return b, nil
}

// check runs the validation that needs the chain, in the API's order: gas (-32000), fee
// against the base fee (-32000), funds against the balance and the in-flight costs (-32000),
// then the signing rules (-32003). It returns the balance it read: funds are checked again
// against it, atomically, when the nonce is reserved.
func (t *Transactions) check(ctx context.Context, ch Chain, chainID uint64, r *txreq.Request) (*big.Int, error) {
	b, err := t.latestBlock(ctx, ch, chainID)
	if err != nil {
		return nil, err
	}
	if err := txreq.CheckGas(r, b.gasLimit, t.cfg.GasCap); err != nil {
		return nil, err
	}
	if b.baseFee != nil {
		price := r.GasPrice
		name := "gasPrice"
		if r.Type() == types.DynamicFeeTxType {
			price, name = r.MaxFeePerGas, "maxFeePerGas"
		}
		if price.Cmp(b.baseFee) < 0 {
			return nil, ErrUnderpriced.Withf("transaction underpriced: %s %s is below the base fee %s of block %d",
				name, price, b.baseFee, b.number)
		}
	}
	balance, err := t.balance(ctx, ch, r.From)
	if err != nil {
		return nil, err
	}
	var n int
	var inflight *big.Int
	err = t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		n, inflight, err = tx.InFlight(ctx, chainID, r.From)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := funded(balance, r.MaxCost(), n, inflight); err != nil {
		return nil, err
	}
	return balance, t.checkRules(r)
}

func (t *Transactions) balance(ctx context.Context, ch Chain, addr common.Address) (*big.Int, error) {
	res, err := ch.Forward(ctx, "eth_getBalance", []byte(`["`+addr.Hex()+`","latest"]`))
	if err != nil {
		return nil, err
	}
	var b hexutil.Big
	if err := json.Unmarshal(res, &b); err != nil {
		return nil, jsonrpc.ErrUpstreamUnavailable.With("the node answered eth_getBalance with something else")
	}
	return b.ToInt(), nil
}

// funded: balance (of the latest block) must cover cost plus every in-flight transaction's
// cost. Transactions mined since that block are counted twice until the confirmer has seen
// them, which errs on the side of refusing.
func funded(balance, cost *big.Int, n int, inflight *big.Int) error {
	need := new(big.Int).Add(cost, inflight)
	if balance.Cmp(need) < 0 {
		return ErrInsufficientFunds.WithData(map[string]string{
			"balance": hexutil.EncodeBig(balance), "required": hexutil.EncodeBig(need),
			"inFlight": fmt.Sprint(n),
		})
	}
	return nil
}

func (t *Transactions) checkRules(r *txreq.Request) error {
	ru, ok := t.rules[r.From]
	if !ok {
		return nil
	}
	if ru.recipients != nil && !ru.recipients[*r.To] {
		return ErrRule.Withf("transaction rejected by a signing rule: %s may not send to %s", r.From.Hex(), r.To.Hex())
	}
	if ru.maxValue != nil && r.Value.Cmp(ru.maxValue) > 0 {
		return ErrRule.Withf("transaction rejected by a signing rule: value %s exceeds the maximum %s of %s",
			r.Value, ru.maxValue, r.From.Hex())
	}
	return nil
}

// reserve takes the next nonce of r.From on chainID and records the transaction, in one store
// transaction: the lowest released slot, else the nonce head, initialised on first use from
// max(the chain's pending nonce, the highest stored nonce + 1). The in-flight cap and funds
// are checked inside the same transaction.
func (t *Transactions) reserve(ctx context.Context, ch Chain, principal string, chainID uint64, r *txreq.Request, fields []byte, kind, idemKey string, balance *big.Int) (*store.TxRecord, error) {
	hk := headKey{chainID, r.From}
	_, known := t.heads.Load(hk)
	if !known {
		if err := t.db.Read(ctx, func(tx *store.Tx) error {
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
		ChainID: chainID, Address: r.From, Principal: principal, Kind: kind, State: store.StateReserved,
		Fields: fields, MaxCost: cost, IdempotencyKey: idemKey,
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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
		n, inflight, err := tx.InFlight(ctx, chainID, r.From)
		if err != nil {
			return err
		}
		if n >= t.cfg.MaxInFlight {
			return jsonrpc.ErrLimitExceeded.Withf("limit exceeded: account %s has %d transactions in flight on chain %d (maxInFlight %d)",
				r.From.Hex(), n, chainID, t.cfg.MaxInFlight)
		}
		if err := funded(balance, cost, n, inflight); err != nil {
			return err
		}
		nonce := next
		if slot, ok, err := tx.ReusableSlot(ctx, chainID, r.From, 0); err != nil {
			return err
		} else if ok && slot < next {
			nonce = slot
		}
		if nonce == next {
			if err := tx.RaiseNextNonce(ctx, chainID, r.From, next+1); err != nil {
				return err
			}
		}
		rec.Nonce = nonce
		return tx.InsertTx(ctx, rec)
	})
	if err != nil {
		return nil, err
	}
	t.heads.Store(hk, struct{}{}) // heads are never deleted
	return rec, nil
}

// headKey names a nonce head.
type headKey struct {
	chainID uint64
	addr    common.Address
}

func (t *Transactions) nonceAt(ctx context.Context, ch Chain, addr common.Address, block string) (uint64, error) {
	res, err := ch.Forward(ctx, "eth_getTransactionCount", []byte(`["`+addr.Hex()+`","`+block+`"]`))
	if err != nil {
		return 0, err
	}
	var n hexutil.Uint64
	if err := json.Unmarshal(res, &n); err != nil {
		return 0, jsonrpc.ErrUpstreamUnavailable.With("the node answered eth_getTransactionCount with something else")
	}
	return uint64(n), nil
}

// complete signs a reserved send, persists the bytes and broadcasts them. retry is true when
// the nonce turned out to be used outside web3gate and nothing was sent.
func (t *Transactions) complete(ctx context.Context, ch Chain, rec *store.TxRecord, r *txreq.Request) (common.Hash, bool, error) {
	raw, hash, err := t.signRecord(rec, r)
	if err != nil {
		t.giveUp(ctx, ch, rec, err.Error())
		return common.Hash{}, false, jsonrpc.ErrInternal.With("signing failed")
	}
	err = t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
		return tx.SetSigned(ctx, rec.ID, raw, hash, store.StateSigned)
	})
	if err != nil {
		// Nothing was sent; the row stays reserved and the confirmer signs and sends it.
		t.log.Error("persisting a signed transaction failed", zap.Uint64("chain", rec.ChainID),
			zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce), zap.Error(err))
		return common.Hash{}, false, jsonrpc.ErrInternal.With("storing the signed transaction failed")
	}
	rec.Raw, rec.Hash, rec.State = raw, hash, store.StateSigned
	return t.broadcast(ctx, ch, rec)
}

// signRecord signs the transaction of rec (built from r, or from the stored fields when r is
// nil) with rec's nonce.
func (t *Transactions) signRecord(rec *store.TxRecord, r *txreq.Request) ([]byte, common.Hash, error) {
	if r == nil {
		var err error
		if r, err = txreq.Parse(append(append([]byte("["), rec.Fields...), ']'), rec.ChainID); err != nil {
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

// Broadcast outcomes a node reports in its error message.
func isAlreadyKnown(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "already known") || strings.Contains(m, "known transaction") ||
		strings.Contains(m, "already imported") || strings.Contains(m, "alreadyknown") ||
		strings.Contains(m, "already in the mempool") || strings.Contains(m, "already exists")
}

func isNonceTooLow(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "nonce too low") || strings.Contains(m, "nonce is too low") ||
		strings.Contains(m, "noncetoolow") || strings.Contains(m, "oldnonce") ||
		strings.Contains(m, "replacement transaction underpriced")
}

// broadcastRetry is the pause between broadcasts of the same bytes after a transport failure.
const broadcastRetry = 200 * time.Millisecond

// broadcast sends rec's signed bytes until a node accepts them (or reports them known), the
// nonce turns out to be used, a node rejects them, or ctx ends. See complete for retry.
func (t *Transactions) broadcast(ctx context.Context, ch Chain, rec *store.TxRecord) (common.Hash, bool, error) {
	params := []byte(`["` + hexutil.Encode(rec.Raw) + `"]`)
	for {
		_, err := ch.Forward(ctx, "eth_sendRawTransaction", params)
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil || errors.As(err, &rpcErr) && isAlreadyKnown(rpcErr.Message):
			t.markBroadcast(ctx, rec)
			return rec.Hash, false, nil
		case errors.As(err, &rpcErr) && isNonceTooLow(rpcErr.Message):
			return t.reconcile(ctx, ch, rec)
		case errors.Is(err, jsonrpc.ErrUpstreamUnavailable) || errors.Is(err, jsonrpc.ErrUpstreamTimeout) || !errors.As(err, &rpcErr):
			// Transport: the same bytes again, until the deadline.
			select {
			case <-ctx.Done():
				return common.Hash{}, false, notAccepted(rec, err)
			case <-time.After(broadcastRetry):
			}
		default:
			// The node refused the transaction itself (fees, funds, gas): it will never be
			// mined, and its nonce must not stay a gap.
			t.giveUp(ctx, ch, rec, "rejected by the node: "+rpcErr.Message)
			return common.Hash{}, false, rpcErr
		}
	}
}

// notAccepted is the error of a transaction persisted but not accepted by any node in time:
// the confirmer keeps sending it, so its hash is in the error's data. A caller retrying with
// the same Idempotency-Key gets that hash instead of a second transaction.
func notAccepted(rec *store.TxRecord, err error) error {
	var rpcErr *jsonrpc.Error
	base := jsonrpc.ErrUpstreamUnavailable
	if errors.As(err, &rpcErr) && errors.Is(rpcErr, jsonrpc.ErrUpstreamTimeout) {
		base = jsonrpc.ErrUpstreamTimeout
	}
	return base.Withf("%s: the transaction is signed and stored, no node has accepted it yet; web3gate keeps broadcasting it",
		base.Message).WithData(map[string]any{"hash": rec.Hash.Hex(), "nonce": hexutil.Uint64(rec.Nonce), "state": store.StateSigned})
}

func (t *Transactions) markBroadcast(ctx context.Context, rec *store.TxRecord) {
	// Not waited for: if a crash loses this write, the row is still signed and is sent
	// again at recovery, which a node answers with "already known".
	id := rec.ID
	t.db.WriteGroupedLater(func(tx *store.Tx) error {
		err := tx.SetState(context.Background(), id, []string{store.StateSigned}, store.StateBroadcast, "")
		if errors.Is(err, store.ErrNotFound) {
			return nil // moved on already (mined by the confirmer)
		}
		return err
	})
	rec.State = store.StateBroadcast
}

// reconcile handles "nonce too low": if one of our attempts at this nonce is mined, the nonce
// was ours; otherwise the nonce was used outside web3gate, the row fails, the nonce head moves
// past the chain's nonce, and the caller may retry with a new nonce.
func (t *Transactions) reconcile(ctx context.Context, ch Chain, rec *store.TxRecord) (common.Hash, bool, error) {
	var attempts []*store.TxRecord
	if err := t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		attempts, err = tx.TxsAtNonce(ctx, rec.ChainID, rec.Address, rec.Nonce)
		return err
	}); err != nil {
		return common.Hash{}, false, err
	}
	for _, a := range attempts {
		if !a.HasHash() {
			continue
		}
		mined, err := t.receipt(ctx, ch, a.Hash)
		if err != nil {
			return common.Hash{}, false, err
		}
		if mined == nil {
			continue
		}
		_ = t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
			_, err := tx.SetMined(ctx, rec.ChainID, a.Hash, mined.number, mined.hash)
			return err
		})
		if a.Hash == rec.Hash {
			return rec.Hash, false, nil // ours, mined already
		}
	}
	pending, err := t.nonceAt(ctx, ch, rec.Address, "pending")
	if err != nil {
		return common.Hash{}, false, err
	}
	err = t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
		if err := tx.SetState(ctx, rec.ID, []string{store.StateSigned, store.StateBroadcast, store.StateReserved}, store.StateFailed,
			"nonce used by another transaction"); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// Nothing was sent: the retry with a new nonce carries the idempotency key on.
		if err := tx.ClearIdempotencyKey(ctx, rec.ID); err != nil {
			return err
		}
		return tx.RaiseNextNonce(ctx, rec.ChainID, rec.Address, pending)
	})
	if err != nil {
		return common.Hash{}, false, err
	}
	t.log.Warn("nonce used outside web3gate", zap.Uint64("chain", rec.ChainID), zap.String("from", rec.Address.Hex()),
		zap.Uint64("nonce", rec.Nonce), zap.Uint64("chain_pending_nonce", pending))
	return common.Hash{}, true, jsonrpc.ErrInvalidParams.Withf("nonce %d of %s was used by a transaction web3gate did not sign; nothing was sent, retry",
		rec.Nonce, rec.Address.Hex())
}

type minedAt struct {
	number uint64
	hash   common.Hash
}

// receipt is where hash was mined, or nil when the node has no receipt for it.
func (t *Transactions) receipt(ctx context.Context, ch Chain, hash common.Hash) (*minedAt, error) {
	res, err := ch.Forward(ctx, "eth_getTransactionReceipt", []byte(`["`+hash.Hex()+`"]`))
	if err != nil {
		return nil, err
	}
	if string(res) == "null" {
		return nil, nil
	}
	var rc struct {
		BlockNumber *hexutil.Big `json:"blockNumber"`
		BlockHash   *common.Hash `json:"blockHash"`
	}
	if err := json.Unmarshal(res, &rc); err != nil || rc.BlockNumber == nil || rc.BlockHash == nil {
		return nil, nil // a pending receipt shape: not mined
	}
	return &minedAt{number: rc.BlockNumber.ToInt().Uint64(), hash: *rc.BlockHash}, nil
}

// giveUp fails rec for good and makes sure its nonce does not stay a gap: when it is the
// account's newest nonce the head moves back onto it, otherwise a zero-value self-transfer
// fills it.
func (t *Transactions) giveUp(ctx context.Context, ch Chain, rec *store.TxRecord, reason string) {
	var lowered bool
	state := store.StateFailed
	if rec.Kind == store.KindSign {
		state = store.StateReleased // never handed out: the next signing takes the slot
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
		if err := tx.SetState(ctx, rec.ID, []string{store.StateReserved, store.StateSigned, store.StateBroadcast},
			state, reason); err != nil {
			return err
		}
		var err error
		lowered, err = tx.LowerNextNonce(ctx, rec.ChainID, rec.Address, rec.Nonce+1, rec.Nonce)
		return err
	})
	if err != nil {
		t.log.Error("failing a transaction failed", zap.Int64("tx", rec.ID), zap.Error(err))
		return
	}
	t.log.Warn("transaction failed", zap.Int64("tx", rec.ID), zap.Uint64("chain", rec.ChainID),
		zap.String("from", rec.Address.Hex()), zap.Uint64("nonce", rec.Nonce), zap.String("reason", reason))
	if !lowered && rec.Kind != store.KindSign {
		t.fill(ctx, ch, rec.ChainID, rec.Address, rec.Principal, rec.Nonce)
	}
}

// fillerGas is the gas of a plain transfer.
const fillerGas = 21000

// fill sends a zero-value self-transfer at nonce, so that the account's later transactions
// are not stuck behind a nonce that will never be used. Its fee is twice the node's gas price
// suggestion.
func (t *Transactions) fill(ctx context.Context, ch Chain, chainID uint64, addr common.Address, principal string, nonce uint64) {
	logger := t.log.With(zap.Uint64("chain", chainID), zap.String("from", addr.Hex()), zap.Uint64("nonce", nonce))
	res, err := ch.Forward(ctx, "eth_gasPrice", nil)
	var price hexutil.Big
	if err == nil {
		err = json.Unmarshal(res, &price)
	}
	if err != nil {
		logger.Error("filling a nonce: no gas price", zap.Error(err))
		return
	}
	p := new(big.Int).Mul(price.ToInt(), big.NewInt(2))
	r := &txreq.Request{From: addr, To: &addr, Gas: fillerGas, Value: new(big.Int), Data: []byte{}, GasPrice: p}
	fields, _ := json.Marshal(r)
	rec := &store.TxRecord{ChainID: chainID, Address: addr, Nonce: nonce, Principal: principal, Kind: store.KindFiller,
		State: store.StateReserved, Fields: fields, MaxCost: r.MaxCost()}
	if err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error { return tx.InsertTx(ctx, rec) }); err != nil {
		logger.Error("filling a nonce: record", zap.Error(err))
		return
	}
	if _, _, err := t.complete(ctx, ch, rec, r); err != nil {
		logger.Error("filling a nonce: not accepted yet; the confirmer retries", zap.Error(err))
		return
	}
	logger.Info("nonce filled with a zero-value self-transfer", zap.String("hash", rec.Hash.Hex()))
}

func (t *Transactions) byIdempotencyKey(ctx context.Context, principal, key string) (*store.TxRecord, error) {
	var rec *store.TxRecord
	err := t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		rec, err = tx.TxByIdempotencyKey(ctx, principal, key)
		return err
	})
	return rec, err
}

// idempotencyPoll is how often a repeated request looks at the first one's progress.
const idempotencyPoll = 20 * time.Millisecond

// awaitIdempotent answers a request whose Idempotency-Key was used already: the same hash
// once the first request's transaction was accepted, its error if it failed.
func (t *Transactions) awaitIdempotent(ctx context.Context, rec *store.TxRecord, fields []byte) (common.Hash, error) {
	if string(rec.Fields) != string(fields) {
		return common.Hash{}, ErrIdempotencyMismatch
	}
	deadline := time.Now().Add(t.cfg.BroadcastTimeout)
	for {
		switch rec.State {
		case store.StateBroadcast, store.StateMined, store.StateConfirmed:
			return rec.Hash, nil
		case store.StateFailed:
			return common.Hash{}, jsonrpc.ErrInvalidParams.Withf("the transaction of this Idempotency-Key failed: %s", rec.Error)
		}
		if time.Now().After(deadline) {
			return common.Hash{}, notAccepted(rec, jsonrpc.ErrUpstreamTimeout)
		}
		select {
		case <-ctx.Done():
			return common.Hash{}, ctx.Err()
		case <-time.After(idempotencyPoll):
		}
		var err error
		if err = t.db.Read(ctx, func(tx *store.Tx) error {
			rec, err = tx.TxByID(ctx, rec.ID)
			return err
		}); err != nil {
			return common.Hash{}, err
		}
	}
}

// Transaction is principal's transaction with hash, or store.ErrNotFound (also for another
// principal's transaction).
func (t *Transactions) Transaction(ctx context.Context, principal string, hash common.Hash) (*store.TxRecord, error) {
	var recs []*store.TxRecord
	if err := t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		recs, err = tx.TxsByHash(ctx, hash)
		return err
	}); err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Principal == principal {
			return r, nil
		}
	}
	return nil, store.ErrNotFound
}
