// Package owners is web3gate's NFT owners index and its route, GET /v1/owners.
//
// Per configured chain an indexer reads the ERC721 Transfer (four topics; ERC20's three-topic
// Transfer is ignored), ERC1155 TransferSingle and TransferBatch logs through the chain's
// upstream pool (eth_getLogs), for every contract or a configured list, from a start block on,
// N confirmations behind the head, and keeps one row per (chain, contract, token, owner) with
// a non-zero amount in the store, with nft_minted (tokens minted per contract) in the same
// transactions. It splits block ranges a node refuses, detects reorgs by parent hash and
// rolls back the blocks they replace (see indexer.go and apply.go). The route answers the
// Balance objects of docs/api-objects.md from the index (routes.go).
package owners

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// TokenSource is what the route needs of the metadata routes (*metadata.Service): the Token
// object of one token, from their cache or fetched.
type TokenSource interface {
	Token(ctx context.Context, chainID uint64, addr common.Address, id *big.Int, force bool) ([]byte, error)
}

// Deps are the Service's collaborators.
type Deps struct {
	// Chain returns the upstream pool of a configured chain.
	Chain func(chainID uint64) (Chain, bool)
	DB    *store.DB
	// Tokens serves the token metadata of nfts=true&fetchNftMetadata=true.
	Tokens   TokenSource
	Registry prometheus.Registerer
	Logger   *zap.Logger
	// Hold, when set, runs the indexer of each chain under the lease
	// "owners-indexer/<chain id>" (lease.Leases.Hold): on one replica at a time, again after
	// a loss. nil runs them here.
	Hold func(ctx context.Context, name string, job func(ctx context.Context))
}

// Service runs the indexers of the configured chains and answers GET /v1/owners.
type Service struct {
	cfg      Config
	db       *store.DB
	tokens   TokenSource
	log      *zap.Logger
	indexers map[uint64]*indexer
	indexed  []uint64 // the indexed chain ids, in configuration order
	hold     func(ctx context.Context, name string, job func(ctx context.Context))

	mu      sync.Mutex
	started bool
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a Service for cfg (defaults set, validated); Start starts its indexers.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.Chain == nil || deps.DB == nil || deps.Tokens == nil {
		return nil, errors.New("owners: Chain, DB and Tokens are required")
	}
	s := &Service{cfg: cfg, db: deps.DB, tokens: deps.Tokens, log: deps.Logger, indexers: map[uint64]*indexer{}, hold: deps.Hold}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.hold == nil {
		s.hold = func(ctx context.Context, _ string, job func(context.Context)) { job(ctx) }
	}
	m := newMetrics(deps.Registry)
	for i, ch := range cfg.Chains {
		if ch.Confirmations == nil {
			return nil, fmt.Errorf("owners: chains[%d]: defaults not set", i)
		}
		pool, ok := deps.Chain(ch.ChainID)
		if !ok {
			return nil, fmt.Errorf("owners: chains[%d]: chain %d has no upstream pool", i, ch.ChainID)
		}
		s.indexers[ch.ChainID] = newIndexer(ch, pool, deps.DB, s.log, m)
		s.indexed = append(s.indexed, ch.ChainID)
	}
	return s, nil
}

// ForgetChain drops the index of chainID, if any. Call it before Start, for a chain that
// started over (a new genesis; the embedded dev chain at every start): the index of the
// previous chain describes blocks that no longer exist.
func (s *Service) ForgetChain(ctx context.Context, chainID uint64) error {
	var n int64
	err := s.db.Write(ctx, func(tx *store.DBTx) error {
		var err error
		n, err = tx.DeleteNFTIndex(ctx, chainID)
		return err
	})
	if err != nil {
		return fmt.Errorf("owners: forget chain %d: %w", chainID, err)
	}
	if n > 0 {
		s.log.Info("dropped the owners index of the chain's previous genesis", zap.Uint64("chain", chainID), zap.Int64("balances", n))
	}
	return nil
}

// Start starts one indexer per configured chain, each under its lease (Deps.Hold); Close
// stops them.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	for _, id := range s.indexed {
		ix := s.indexers[id]
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.hold(ctx, fmt.Sprintf("owners-indexer/%d", id), ix.run)
		}()
	}
}

// Close stops the indexers and waits for them (a write in progress is rolled back).
func (s *Service) Close() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.wg.Wait()
}
