package txmgr

// The nonce manager itself: its collaborators (Deps, Chain), the Manager type and New.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet"
)

// Chain is one chain as the nonce manager uses it: JSON-RPC calls through the upstream pool.
type Chain interface {
	// Forward sends method(params) and returns the raw JSON result; the error is a
	// *jsonrpc.Error (an upstream's own error passed through, or -32002/-32011).
	Forward(ctx context.Context, method string, params []byte) ([]byte, error)
}

// Deps are the nonce manager's collaborators.
type Deps struct {
	// Signers signs as the accounts, whichever backend holds their keys.
	Signers *wallet.Signers
	DB      *store.DB
	Chains  map[uint64]Chain
	Logger  *zap.Logger
	// Hold, when set, runs the confirmer of each chain under the lease "confirmer/<chain id>"
	// (lease.Leases.Hold): on one replica at a time, again after a loss. nil runs them here.
	Hold func(ctx context.Context, name string, job func(ctx context.Context))
	// Shared says other processes send transactions from the same store (replicas on
	// PostgreSQL): a confirmer starting then finishes only rows untouched for longer than a
	// request's own work, as another replica's request may be at work on a newer one.
	Shared bool
	// Registry takes the fee bumping's metrics; nil: not exported.
	Registry prometheus.Registerer
	// Tracer makes the spans of the send path (trace.go); nil: tracing off.
	Tracer trace.Tracer
}

// Manager is the nonce manager: it signs, sends and tracks the transactions of the accounts
// the service holds.
type Manager struct {
	cfg    Config
	rules  map[common.Address]rule
	keys   *wallet.Signers
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

	tracer trace.Tracer // nil: tracing off
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
	if deps.Signers == nil || deps.DB == nil {
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
	metrics := newBumpMetrics(deps.Registry)
	metrics.initChains(slices.Sorted(maps.Keys(deps.Chains)))
	return &Manager{cfg: cfg, rules: rules, keys: deps.Signers, db: deps.DB, chains: deps.Chains, log: log, slots: slots,
		hold: hold, shared: deps.Shared, created: time.Now(), groupReservations: deps.DB.Driver() == store.DriverPostgres,
		bumps: bumps, metrics: metrics, tracer: deps.Tracer}, nil
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
