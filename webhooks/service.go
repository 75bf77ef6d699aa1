// Package webhooks delivers every state change of a principal's transaction requests to the
// principal's endpoints: signed JSON events (HMAC-SHA256, Stripe's header form), at least once,
// in order per request, from a durable outbox in the store.
//
// The outbox is written by the store itself: a trigger on txs records an event, and a
// delivery per enabled endpoint of the principal, in the transaction that changes the state
// (store/webhooks.go), so a change is never lost between the store and the deliverer, whatever
// stops when. The deliverer runs on one replica at a time (the lease "webhooks"), reads the due
// deliveries, posts them (never two of one request to one endpoint at once, and never an event
// while an earlier one of its request to that endpoint is pending), and records each attempt:
// delivered on a 2xx, else tried again after an exponential backoff, dead after maxAttempts.
// Destinations are checked against the metadata fetcher's address policy (internal/netpolicy).
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/netpolicy"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// LeaseName is the lease the deliverer runs under.
const LeaseName = "webhooks"

// Deps are the service's collaborators.
type Deps struct {
	DB *store.DB
	// Logger receives dead deliveries, admin changes and store errors (never a secret, a URL's
	// query or a body). nil discards.
	Logger *zap.Logger
	// Registry receives the web3gate_webhook_* metrics; nil registers nothing.
	Registry prometheus.Registerer
	// Hold, when set, runs the deliverer under the lease LeaseName (lease.Leases.Hold): on
	// one replica at a time. nil runs it here.
	Hold func(ctx context.Context, name string, job func(ctx context.Context))
	// Getenv reads the endpoints' secrets; nil is os.Getenv.
	Getenv func(string) string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Service is the webhook deliverer and admin API.
type Service struct {
	cfg    Config
	db     *store.DB
	log    *zap.Logger
	m      *metrics
	hold   func(ctx context.Context, name string, job func(ctx context.Context))
	getenv func(string) string
	now    func() time.Time
	policy netpolicy.Policy
	client *client
	tokens proxy.AdminTokens
	// pruneEvery is how often retention runs (pruneEvery; tests shorten it).
	pruneEvery time.Duration
}

// New builds the service of a defaulted config; it validates it again.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.DB == nil {
		return nil, errors.New("webhooks: a store is required")
	}
	s := &Service{cfg: cfg, db: deps.DB, log: deps.Logger, hold: deps.Hold, getenv: deps.Getenv, now: deps.Now, pruneEvery: pruneEvery}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.getenv == nil {
		s.getenv = os.Getenv
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	var err error
	if s.policy, err = netpolicy.New(cfg.AllowNetworks); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if s.tokens, err = proxy.NewAdminTokens("webhooks.admin.tokens", cfg.Admin.Tokens); err != nil {
		return nil, err
	}
	s.client = newClient(cfg, s.policy)
	s.m = newMetrics(deps.Registry)
	return s, nil
}

// Sync writes the configured endpoints into the store (upserted by principal and URL, the
// secret read from each one's secretEnv) and disables the config endpoints no longer listed.
func (s *Service) Sync(ctx context.Context) error {
	ws := make([]store.Webhook, 0, len(s.cfg.Endpoints))
	for i, e := range s.cfg.Endpoints {
		secret := s.getenv(e.SecretEnv)
		if len(secret) < minSecretLen {
			return fmt.Errorf("webhooks.endpoints[%d].secretEnv: the environment variable %s must hold the endpoint's signing secret, at least %d characters", i, e.SecretEnv, minSecretLen)
		}
		id, err := newID()
		if err != nil {
			return err
		}
		ws = append(ws, store.Webhook{ID: id, Principal: e.Principal, URL: e.URL, Secret: secret, CreatedAt: s.now()})
	}
	var synced []store.Webhook
	sync := func() error {
		return s.db.Write(ctx, func(tx *store.DBTx) error {
			var err error
			synced, err = tx.SyncConfigWebhooks(ctx, ws)
			return err
		})
	}
	err := sync()
	if errors.Is(err, store.ErrExists) {
		err = sync() // another replica inserted the same endpoint at the same moment
	}
	if err != nil {
		return fmt.Errorf("webhooks: sync webhooks.endpoints: %w", err)
	}
	for _, w := range synced {
		s.log.Info("webhook endpoint from the config", zap.String("webhook", w.ID), zap.String("principal", w.Principal))
	}
	return nil
}

// Run delivers until ctx ends, under the lease LeaseName when Deps.Hold is set. With
// webhooks.enabled false it returns at once. While no principal has an enabled endpoint
// nothing runs and no lease is held: the store is asked every pollInterval whether one was
// added (a config endpoint at start, or one made through the admin API).
func (s *Service) Run(ctx context.Context) {
	if !s.cfg.Enabled {
		return
	}
	defer s.client.closeIdle()
	for {
		if !s.awaitEndpoints(ctx) {
			return
		}
		// The job ends (and the lease is released) when the last endpoint is gone.
		hctx, cancel := context.WithCancel(ctx)
		job := func(jctx context.Context) { s.deliver(jctx, cancel) }
		if s.hold == nil {
			job(hctx)
		} else {
			s.hold(hctx, LeaseName, job)
		}
		cancel()
	}
}

// awaitEndpoints returns true once an enabled endpoint exists, false when ctx ended first.
func (s *Service) awaitEndpoints(ctx context.Context) bool {
	for {
		has, err := s.hasEndpoints(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("webhook endpoints not read; trying again", zap.Error(err))
		}
		if has {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(s.cfg.PollInterval):
		}
	}
}

func (s *Service) hasEndpoints(ctx context.Context) (bool, error) {
	var has bool
	err := s.db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		has, err = tx.HasEnabledWebhooks(ctx)
		return err
	})
	return has, err
}

// newID is a new endpoint id: "wh_" and 24 hex digits.
func newID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook id: %w", err)
	}
	return "wh_" + hex.EncodeToString(b[:]), nil
}

// newSecret is a new endpoint secret: "whsec_" and 32 random bytes in hex.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return "whsec_" + hex.EncodeToString(b[:]), nil
}
