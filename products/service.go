package products

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// Deps are the catalog's collaborators.
type Deps struct {
	DB *store.DB
	// Networks maps product network names to chain ids (NetworkChains of the upstreams
	// config).
	Networks map[string]uint64
	// Scope is what the owners indexer follows: the products it covers take totalSold from
	// the chain. Empty: every product shows its stored figure.
	Scope IndexScope
	// Logger receives the admin API's writes and its internal errors; nil discards them.
	Logger *zap.Logger
	// Now is the clock of "live" when a list gives no liveAt; nil: time.Now.
	Now func() time.Time
}

// Service is the product catalog: the list route and the admin API.
type Service struct {
	db      *store.DB
	log     *zap.Logger
	now     func() time.Time
	maxBody int64
	tokens  proxy.AdminTokens

	idPrefix string
	idSeq    atomic.Uint64
}

// New builds the catalog from a validated config, and writes the scope of the sold rule to
// the store (store.SetProductSoldScope), recomputing the products' sold figures when it
// changed.
func New(ctx context.Context, cfg Config, deps Deps) (*Service, error) {
	if deps.DB == nil {
		return nil, errors.New("products: a store is required")
	}
	indexed, err := indexedNetworks(deps.Networks, deps.Scope)
	if err != nil {
		return nil, err
	}
	s := &Service{db: deps.DB, log: deps.Logger, now: deps.Now, maxBody: cfg.Admin.MaxBodyBytes}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	changed, err := s.db.SetProductSoldScope(ctx, indexed)
	if err != nil {
		return nil, err
	}
	if changed {
		s.log.Info("the scope of sold-from-the-chain changed; every product's sold figure was recomputed",
			zap.Int("indexed networks", len(indexed)))
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.tokens, err = proxy.NewAdminTokens("products.admin.tokens", cfg.Admin.Tokens); err != nil {
		return nil, err
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("products: request id prefix: %w", err)
	}
	s.idPrefix = "admin-" + hex.EncodeToString(rnd[:]) + "-"
	return s, nil
}
