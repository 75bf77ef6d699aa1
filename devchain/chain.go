//go:build !nodevchain

// Package devchain runs an embedded, in-process go-ethereum dev node, built the way
// `geth --dev` builds one: every fork active at genesis, a simulated beacon that mines a
// block as soon as transactions arrive, pre-funded deterministic accounts, an in-memory
// database and no networking. Requests reach it through Handler, the node's in-process
// JSON-RPC handler; no socket is opened.
//
// Logging: go-ethereum logs through a process-global root logger (package
// github.com/ethereum/go-ethereum/log) whose default handler discards everything. This
// package leaves that global alone. The node's own logger (node.Config.Logger, used by the
// node, its RPC and P2P servers) is routed into Deps.Logger at warn and above; records the
// eth service and the miner write to the global root stay discarded unless the process sets
// the root itself with log.SetDefault.
package devchain

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"go.uber.org/zap"
)

// loggedAddresses is how many account addresses the start-up line shows.
const loggedAddresses = 3

// Deps are the dependencies of a Chain.
type Deps struct {
	Logger *zap.Logger // nil: no logs
}

// Chain is a running embedded dev node.
type Chain struct {
	chainID  uint64
	accounts []Account
	stack    *node.Node
	handler  *rpc.Server

	closeOnce sync.Once
	closeErr  error
}

// Start builds and starts a dev node from cfg and returns once it serves requests. Unset
// fields of cfg take their defaults (see Config.SetDefaults); cfg.Enabled is not consulted,
// deciding whether to start is the caller's business.
func Start(cfg Config, deps Deps) (*Chain, error) {
	begin := time.Now()
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("devchain config: %w", err)
	}
	logger := deps.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("devchain").With(zap.Uint64("chain", cfg.ChainID))

	accounts, err := deriveAccounts(cfg.Accounts)
	if err != nil {
		return nil, err
	}

	stack, err := node.New(nodeConfig(logger))
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	backend, err := eth.New(stack, ethConfig(cfg, accounts))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("new eth service: %w", err), stack.Close())
	}
	filterSystem := filters.NewFilterSystem(backend.APIBackend, filters.Config{
		LogCacheSize:  ethconfig.Defaults.FilterLogCacheSize,
		LogQueryLimit: ethconfig.Defaults.LogQueryLimit,
		RangeLimit:    ethconfig.Defaults.RangeLimit,
	})
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(filterSystem)}})

	// Period 0: the beacon seals only when asked. automine asks whenever transactions reach
	// the pool; it replaces catalyst.RegisterSimulatedBeaconAPIs, whose loop can panic when
	// the node closes early (see automine). The fee recipient is the zero address so that
	// fees never change the balances of the dev accounts.
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, backend)
	if err != nil {
		// eth.New already started goroutines that only the eth lifecycle's Stop ends, and
		// Stop needs a started service: start and close the node to release them.
		startErr := stack.Start()
		return nil, errors.Join(fmt.Errorf("new simulated beacon: %w", err), startErr, stack.Close())
	}
	stack.RegisterLifecycle(beacon)
	// Registered last, so it starts after the eth service and stops before it.
	stack.RegisterLifecycle(newAutomine(beacon, backend.TxPool(), backend.BlockChain(), cfg.BurstBlockInterval, logger))

	if err := stack.Start(); err != nil {
		// A failed Start stops what it started and closes the node.
		return nil, fmt.Errorf("start node: %w", err)
	}
	// The transaction indexer starts on the first head event and, until its first pass is
	// done, every by-hash lookup answers "transaction indexing is in progress". At genesis
	// there is no head event, so block 1 is sealed here (nothing else can reach the pool
	// yet), and the chain is served once the index has caught up.
	beacon.Commit()
	if err := waitIndexed(backend, 10*time.Second); err != nil {
		return nil, errors.Join(err, stack.Close())
	}
	handler, err := stack.RPCHandler()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("rpc handler: %w", err), stack.Close())
	}

	c := &Chain{chainID: cfg.ChainID, accounts: accounts, stack: stack, handler: handler}
	shown := make([]string, 0, loggedAddresses)
	for _, a := range accounts[:min(loggedAddresses, len(accounts))] {
		shown = append(shown, a.Address.Hex())
	}
	logger.Info("dev chain started",
		zap.Int("accounts", len(accounts)),
		zap.Strings("first_addresses", shown),
		zap.Duration("took", time.Since(begin)))
	return c, nil
}

// nodeConfig is the node shell: in-memory data dir, no P2P, no HTTP, WS or IPC endpoint.
func nodeConfig(logger *zap.Logger) *node.Config {
	return &node.Config{
		Name:                 "web3gate-devchain",
		DataDir:              "", // in memory; the node makes (and removes) a temporary keystore dir
		IPCPath:              "",
		HTTPHost:             "",
		WSHost:               "",
		BatchRequestLimit:    node.DefaultConfig.BatchRequestLimit,
		BatchResponseMaxSize: node.DefaultConfig.BatchResponseMaxSize,
		P2P: p2p.Config{
			// No listener, no discovery and no peer slots: MaxPeers 0 also stops dialing of
			// static peers (admin_addPeer). NoDial is left false because with an empty
			// listen address it only adds a warning on every start.
			MaxPeers:    0,
			ListenAddr:  "",
			NoDiscovery: true,
			DiscoveryV4: false,
			DiscoveryV5: false,
		},
		Logger: log.NewLogger(newZapHandler(logger.Named("geth"), slog.LevelWarn)),
	}
}

// ethConfig is the eth service of `geth --dev`, with our genesis and chain id.
func ethConfig(cfg Config, accounts []Account) *ethconfig.Config {
	// AllDevChainProtocolChanges is a shared pointer: copy it before setting the chain id.
	chainConfig := *params.AllDevChainProtocolChanges
	chainConfig.ChainID = new(big.Int).SetUint64(cfg.ChainID)

	// The system contracts the forks active at genesis call into, plus the dev accounts.
	alloc := core.SystemContractAllocs()
	balance := new(big.Int).Mul(new(big.Int).SetUint64(cfg.BalanceEther), big.NewInt(params.Ether))
	for _, a := range accounts {
		alloc[a.Address] = types.Account{Balance: balance}
	}

	ec := ethconfig.Defaults
	ec.NetworkId = cfg.ChainID
	ec.SyncMode = ethconfig.FullSync
	ec.EnablePreimageRecording = true
	// No log search index (go-ethereum's filtermaps): rendering it at every block took about
	// a third of the process's CPU under a send load, and a dev chain's history is short.
	// eth_getLogs still answers, from each block's bloom and receipts (go-ethereum's
	// unindexed search, the one it uses anyway for filters without address or topic).
	ec.LogNoHistory = true
	ec.Genesis = &core.Genesis{
		Config:     &chainConfig,
		GasLimit:   cfg.GasLimit,
		BaseFee:    big.NewInt(params.InitialBaseFee),
		Difficulty: big.NewInt(0),
		Alloc:      alloc,
		// Random: every start is a new chain, and its genesis hash says so. A store kept
		// across starts tells this chain from the previous one by that hash (web3gate drops
		// the previous chain's nonces, transactions, metadata and owners index). Addresses
		// do not change: accounts come from fixed keys, contract addresses from deployer
		// and nonce.
		ExtraData: randomExtra(),
	}
	ec.Miner.GasCeil = cfg.GasLimit
	// 1 wei, as geth --dev: the pool accepts tips from TxPool.PriceLimit (1 wei), and a miner
	// minimum above that leaves transactions the pool counts as executable and no block
	// includes (see maxIdleCommits).
	ec.Miner.GasPrice = big.NewInt(1)
	// A dev node takes bursts from one account: transactions of one sender arrive out of
	// nonce order when signed concurrently, and geth's defaults (16 executable and 64 queued
	// per account) would drop the excess.
	ec.TxPool.AccountSlots = 8192
	ec.TxPool.AccountQueue = 8192
	ec.TxPool.GlobalSlots = 16384
	ec.TxPool.GlobalQueue = 16384
	return &ec
}

// randomExtra is the genesis block's extra data: 16 random bytes.
func randomExtra() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return b
}

// ChainID returns the chain id the node signs and serves.
func (c *Chain) ChainID() uint64 { return c.chainID }

// Accounts returns the pre-funded dev accounts, account 0 first. The slice is a copy; the
// keys are shared and must not be modified.
func (c *Chain) Accounts() []Account {
	out := make([]Account, len(c.accounts))
	copy(out, c.accounts)
	return out
}

// Handler returns the node's in-process JSON-RPC handler (an *rpc.Server). It takes POSTed
// JSON-RPC bodies, single or batch, with Content-Type application/json. It serves every API
// the node registers, not only eth_, net_ and web3_: also admin_, debug_ (whose methods act
// on the whole process: profiling, GC settings, stack dumps), txpool_ and others; the caller
// decides what to forward. After Close it answers every request with an empty body.
func (c *Chain) Handler() http.Handler { return c.handler }

// Close stops the node and releases everything it holds. It is safe to call more than once;
// later calls return the first call's result.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		if err := c.stack.Close(); err != nil {
			c.closeErr = fmt.Errorf("close dev chain %d: %w", c.chainID, err)
		}
	})
	return c.closeErr
}

// waitIndexed waits until the transaction indexer has caught up with the chain.
func waitIndexed(backend *eth.Ethereum, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		p, err := backend.BlockChain().TxIndexProgress()
		if err != nil {
			return fmt.Errorf("transaction index: %w", err)
		}
		if p.Done() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("transaction index not ready after %s", limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
