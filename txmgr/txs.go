package txmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet"
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

// Deps are the nonce manager's collaborators.
type Deps struct {
	Keys   *wallet.Keys
	DB     *store.DB
	Chains map[uint64]Chain
	Logger *zap.Logger
	// Hold, when set, runs the confirmer of each chain under the lease "confirmer/<chain id>"
	// (lease.Leases.Hold): on one replica at a time, again after a loss. nil runs them here.
	Hold func(ctx context.Context, name string, job func(ctx context.Context))
	// Shared says other processes send transactions from the same store (replicas on
	// PostgreSQL): a confirmer starting then finishes only rows untouched for longer than a
	// request's own work, as another replica's request may be at work on a newer one.
	Shared bool
	// Registry takes the fee bumping's metrics; nil: not exported.
	Registry prometheus.Registerer
}

// Manager is the nonce manager: it signs, sends and tracks the transactions of the accounts
// the service holds.
type Manager struct {
	cfg    Config
	rules  map[common.Address]rule
	keys   *wallet.Keys
	db     *store.DB
	chains map[uint64]Chain
	log    *zap.Logger
	hold   func(ctx context.Context, name string, job func(ctx context.Context))
	shared bool
	// created precedes every request of this process: a row of this store updated before it
	// is no request's of this process.
	created time.Time

	blocks sync.Map // chain id -> *blockInfo, the latest block seen
	heads  sync.Map // headKey -> struct{}: nonce heads known to exist in the store
	slots  map[uint64]*slotSignal
	queued sync.Map // headKey -> *atomic.Int32: sends waiting for a slot
	// groupReservations: reservations of one account share transactions (reserve_group.go;
	// PostgreSQL), queued in reserveQueues (headKey -> *reserveQueue).
	groupReservations bool
	reserveQueues     sync.Map

	genesis sync.Map // chain id -> *genesisGate: checked before the chain's first nonce (genesis.go)

	bumps   map[uint64]bumpRules // the bump settings of each configured chain (bump.go)
	metrics *bumpMetrics
}

// New builds the manager; Run starts its confirmers.
func New(cfg Config, deps Deps) (*Manager, error) {
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
	slots := make(map[uint64]*slotSignal, len(deps.Chains))
	for id := range deps.Chains {
		slots[id] = newSlotSignal()
	}
	hold := deps.Hold
	if hold == nil {
		hold = func(ctx context.Context, _ string, job func(context.Context)) { job(ctx) }
	}
	bumps := make(map[uint64]bumpRules, len(deps.Chains))
	for id := range deps.Chains {
		bumps[id] = cfg.Bump.forChain(id)
	}
	return &Manager{cfg: cfg, rules: rules, keys: deps.Keys, db: deps.DB, chains: deps.Chains, log: log, slots: slots,
		hold: hold, shared: deps.Shared, created: time.Now(), groupReservations: deps.DB.Driver() == store.DriverPostgres,
		bumps: bumps, metrics: newBumpMetrics(deps.Registry)}, nil
}

// Fill reports whether requests are read in the form clients send (ParseFill) rather than
// the strict form.
func (t *Manager) Fill() bool { return *t.cfg.Fill }

func (t *Manager) chain(ctx context.Context, chainID uint64) (Chain, error) {
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
		return hash, err
	}
}

// SignTransaction is eth_signTransaction: the same completion, checks and reservation as Send,
// then the signed bytes are persisted with the nonce "handed out" to the caller, who submits
// them.
func (t *Manager) SignTransaction(ctx context.Context, principal string, chainID uint64, r *txreq.Request) ([]byte, error) {
	ch, err := t.chain(ctx, chainID)
	if err != nil {
		return nil, err
	}
	request, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	rec, err := t.prepareAndReserve(ctx, ch, principal, chainID, r, request, store.KindSign, "", "")
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
	err = t.db.WriteOne(wctx, func(tx *store.Tx) error {
		return tx.SetHandedOut(wctx, rec.ID, raw, hash, expires)
	})
	if err != nil {
		// Not handed out: the confirmer releases the reserved slot (kind sign is never sent).
		return nil, t.notStored(rec, err, "it is not handed out; retry")
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
		b, reused, err := t.latestBlock(ctx, ch, chainID)
		if err != nil {
			return nil, err
		}
		if err := t.fillIn(ctx, ch, b, r); err != nil {
			return nil, err
		}
		balance, err := t.check(ctx, ch, chainID, b, r)
		if errors.Is(err, ErrUnderpriced) && reused {
			// The head may have moved since b was read (the pool learns of new heads at its
			// polls, and a dev chain seals a block per send): read it again before refusing.
			if b, err = t.readLatestBlock(ctx, ch, chainID); err == nil {
				balance, err = t.check(ctx, ch, chainID, b, r)
			}
		}
		if err != nil {
			return nil, err
		}
		fields, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		res := reservation{principal: principal, kind: kind, idemKey: idemKey, feeBump: feeBump, fields: fields, filled: r.Filled.Names(), balance: balance}
		if string(fields) != string(request) {
			res.request = request
		}
		rec, err := t.reserve(ctx, ch, chainID, r, res)
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

// inFlight is the number of transactions of addr in flight on chainID.
func (t *Manager) inFlight(ctx context.Context, chainID uint64, addr common.Address) (int, error) {
	var n int
	err := t.db.ReadOne(ctx, func(tx *store.Tx) error {
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

// blockInfo is what filling and the checks need from the latest block.
type blockInfo struct {
	number   uint64
	gasLimit uint64
	gasUsed  uint64
	baseFee  *big.Int // nil before London
	at       time.Time
	head     uint64 // the pool's head when it was read (headTracker)
}

// blockInfoMaxAge bounds how long a read latest block is reused; a new head seen by the
// pool's head tracking replaces it at once, and a fee it would refuse is checked again
// against a block read anew.
const blockInfoMaxAge = 500 * time.Millisecond

// headTracker is a chain that follows its head (upstreams.Pool).
type headTracker interface{ Head() uint64 }

// latestBlock is the chain's latest block: the one an earlier call read while it is fresh
// (reused), else read now.
func (t *Manager) latestBlock(ctx context.Context, ch Chain, chainID uint64) (b *blockInfo, reused bool, err error) {
	if v, ok := t.blocks.Load(chainID); ok {
		b := v.(*blockInfo)
		ht, tracked := ch.(headTracker)
		if time.Since(b.at) < blockInfoMaxAge && (!tracked || ht.Head() == b.head) {
			return b, true, nil
		}
	}
	b, err = t.readLatestBlock(ctx, ch, chainID)
	return b, false, err
}

// readLatestBlock reads the latest block from the chain, for latestBlock to reuse.
func (t *Manager) readLatestBlock(ctx context.Context, ch Chain, chainID uint64) (*blockInfo, error) {
	var head uint64
	if ht, tracked := ch.(headTracker); tracked {
		head = ht.Head()
	}
	res, err := ch.Forward(ctx, "eth_getBlockByNumber", []byte(`["latest",false]`))
	if err != nil {
		return nil, err
	}
	var h struct {
		Number   *hexutil.Big `json:"number"`
		GasLimit *hexutil.Big `json:"gasLimit"`
		GasUsed  *hexutil.Big `json:"gasUsed"`
		BaseFee  *hexutil.Big `json:"baseFeePerGas"`
	}
	if err := json.Unmarshal(res, &h); err != nil || h.Number == nil || h.GasLimit == nil {
		return nil, jsonrpc.ErrUpstreamUnavailable.With("the node answered the latest block with something else")
	}
	b := &blockInfo{number: h.Number.ToInt().Uint64(), gasLimit: h.GasLimit.ToInt().Uint64(), baseFee: (*big.Int)(h.BaseFee),
		at: time.Now(), head: head}
	if h.GasUsed != nil {
		b.gasUsed = h.GasUsed.ToInt().Uint64()
	}
	t.blocks.Store(chainID, b)
	return b, nil
}

// check runs the validation that needs the chain, in the API's order: gas (-32000), fee
// against the base fee (-32000), funds against the balance and the in-flight costs (-32000),
// then the signing rules (-32003). It returns the balance it read: funds are checked again
// against it, atomically, when the nonce is reserved.
//
// The fee is refused only when no next block could take it: below the lowest base fee the
// block after b can have (b's less 1/8, EIP-1559). web3gate is never stricter than the nodes
// behind it; a fee a node then refuses comes back with the node's words.
func (t *Manager) check(ctx context.Context, ch Chain, chainID uint64, b *blockInfo, r *txreq.Request) (*big.Int, error) {
	if err := txreq.CheckGas(r, b.gasLimit, t.cfg.GasCap); err != nil {
		return nil, err
	}
	if b.baseFee != nil {
		price := r.GasPrice
		name := "gasPrice"
		if r.Type() == types.DynamicFeeTxType {
			price, name = r.MaxFeePerGas, "maxFeePerGas"
		}
		if floor := minNextBaseFee(b); price.Cmp(floor) < 0 {
			return nil, ErrUnderpriced.Withf("transaction underpriced: %s %s is below %s, the lowest base fee the block after block %d (base fee %s) can have",
				name, price, floor, b.number, b.baseFee)
		}
	}
	balance, err := t.balance(ctx, ch, r.From)
	if err != nil {
		return nil, err
	}
	var n int
	var inflight *big.Int
	err = t.db.ReadOne(ctx, func(tx *store.Tx) error {
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

func (t *Manager) balance(ctx context.Context, ch Chain, addr common.Address) (*big.Int, error) {
	b, err := forwardAs[hexutil.Big](ctx, ch, "eth_getBalance", []byte(`["`+addr.Hex()+`","latest"]`))
	return b.ToInt(), err
}

// forwardAs sends method(params) to ch and decodes the result as a T; a result of another
// shape is the node's failure (-32011).
func forwardAs[T any](ctx context.Context, ch Chain, method string, params []byte) (T, error) {
	var v T
	res, err := ch.Forward(ctx, method, params)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(res, &v); err != nil {
		return v, jsonrpc.ErrUpstreamUnavailable.Withf("the node answered %s with something else", method)
	}
	return v, nil
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

func (t *Manager) checkRules(r *txreq.Request) error {
	ru, ok := t.rules[r.From]
	if !ok {
		return nil
	}
	if r.To == nil && (ru.noCreate || ru.recipients != nil) {
		return ErrRule.Withf("transaction rejected by a signing rule: %s may not create contracts", r.From.Hex())
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

// reservation is what reserve records besides the request.
type reservation struct {
	principal, kind, idemKey string
	feeBump                  string   // the X-Fee-Bump choice, "" when none
	fields                   []byte   // the complete request, canonical JSON
	request                  []byte   // the request as sent, when fields differ from it
	filled                   []string // the fields filled in
	balance                  *big.Int // the balance check read
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
	err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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
		return tx.InsertTx(ctx, rec)
	})
	if err != nil {
		return nil, err
	}
	t.heads.Store(hk, struct{}{}) // heads are never deleted
	return rec, nil
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
	err := t.db.Read(ctx, func(tx *store.Tx) error {
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
func lowestFree(ctx context.Context, tx *store.Tx, chainID uint64, addr common.Address, next uint64) (uint64, error) {
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

func (t *Manager) nonceAt(ctx context.Context, ch Chain, addr common.Address, block string) (uint64, error) {
	n, err := forwardAs[hexutil.Uint64](ctx, ch, "eth_getTransactionCount", []byte(`["`+addr.Hex()+`","`+block+`"]`))
	return uint64(n), err
}

// complete signs a reserved send, persists the bytes and broadcasts them. retry is true when
// the nonce turned out to be used outside web3gate and nothing was sent.
func (t *Manager) complete(ctx context.Context, ch Chain, rec *store.TxRecord, r *txreq.Request) (common.Hash, bool, error) {
	raw, hash, err := t.signRecord(rec, r)
	if err != nil {
		t.giveUp(ctx, ch, rec, err.Error())
		return common.Hash{}, false, jsonrpc.ErrInternal.With("signing failed")
	}
	err = t.db.WriteOne(ctx, func(tx *store.Tx) error {
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
func (t *Manager) broadcast(ctx context.Context, ch Chain, rec *store.TxRecord) (common.Hash, bool, error) {
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
		case rec.State == store.StateBroadcast || rec.State == store.StateStuck:
			// A rebroadcast refused (anvil refuses a fee cap below the current base fee even
			// for a transaction in its pool): a node accepted these bytes once, they may still
			// be mined, and fee bumping raises a priced-out one. Not a failure.
			return common.Hash{}, false, rpcErr
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

func (t *Manager) markBroadcast(ctx context.Context, rec *store.TxRecord) {
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
func (t *Manager) reconcile(ctx context.Context, ch Chain, rec *store.TxRecord) (common.Hash, bool, error) {
	var attempts []*store.TxRecord
	if err := t.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		attempts, err = tx.TxsAtNonce(ctx, rec.ChainID, rec.Address, rec.Nonce)
		return err
	}); err != nil {
		return common.Hash{}, false, err
	}
	for _, a := range attempts {
		if a.Versions > 0 {
			// Any of its versions may be the one mined.
			mined, err := t.settle(ctx, ch, a)
			if err != nil {
				return common.Hash{}, false, err
			}
			if a.ID == rec.ID && (mined || a.State == store.StateBroadcast || a.State == store.StateStuck) {
				// Ours: mined, or a later version of it holds the nonce in the node's pool
				// (a version added since rec was read).
				return rec.Hash, false, nil
			}
			continue
		}
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
		if err := tx.SetState(ctx, rec.ID, []string{store.StateSigned, store.StateBroadcast, store.StateStuck, store.StateReserved}, store.StateFailed,
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
func (t *Manager) receipt(ctx context.Context, ch Chain, hash common.Hash) (*minedAt, error) {
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
func (t *Manager) giveUp(ctx context.Context, ch Chain, rec *store.TxRecord, reason string) {
	var lowered bool
	state := store.StateFailed
	if rec.Kind == store.KindSign {
		state = store.StateReleased // never handed out: the next signing takes the slot
	}
	err := t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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
		t.log.Error("failing a transaction failed", zap.Int64("tx", rec.ID), zap.Error(err))
		return
	}
	t.log.Warn("transaction failed", zap.Int64("tx", rec.ID), zap.Uint64("chain", rec.ChainID),
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
	err = t.db.WriteGrouped(ctx, func(tx *store.Tx) error {
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

func (t *Manager) byIdempotencyKey(ctx context.Context, principal, key string) (*store.TxRecord, error) {
	var rec *store.TxRecord
	err := t.db.ReadOne(ctx, func(tx *store.Tx) error {
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
func (t *Manager) awaitIdempotent(ctx context.Context, rec *store.TxRecord, request []byte) (common.Hash, error) {
	sent := rec.Request
	if sent == nil {
		sent = rec.Fields
	}
	if string(sent) != string(request) {
		return common.Hash{}, ErrIdempotencyMismatch
	}
	deadline := time.Now().Add(t.cfg.BroadcastTimeout)
	for {
		switch rec.State {
		case store.StateBroadcast, store.StateStuck, store.StateMined, store.StateConfirmed, store.StateCancelled:
			return rec.Hash, nil // the original hash, whichever version was mined
		case store.StateFailed:
			if rec.BlockHash != (common.Hash{}) {
				return rec.Hash, nil // sent and mined, then reverted: the send itself succeeded
			}
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
		if err = t.db.ReadOne(ctx, func(tx *store.Tx) error {
			rec, err = tx.TxByID(ctx, rec.ID)
			return err
		}); err != nil {
			return common.Hash{}, err
		}
	}
}

// Transaction is principal's transaction with hash, or store.ErrNotFound (also for another
// principal's transaction).
func (t *Manager) Transaction(ctx context.Context, principal string, hash common.Hash) (*store.TxRecord, error) {
	var recs []*store.TxRecord
	if err := t.db.ReadOne(ctx, func(tx *store.Tx) error {
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
	// A later version's hash (a bump, speed-up or cancel) finds its request too.
	var found *store.TxRecord
	if err := t.db.ReadOne(ctx, func(tx *store.Tx) error {
		vs, err := tx.VersionsByHash(ctx, hash)
		if err != nil {
			return err
		}
		for _, v := range vs {
			r, err := tx.TxByID(ctx, v.TxID)
			if err != nil {
				return err
			}
			if r.Principal == principal {
				found = r
				return nil
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if found == nil {
		return nil, store.ErrNotFound
	}
	return found, nil
}
