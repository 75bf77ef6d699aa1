package app

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/middleware/filters"
	"github.com/web3gate/web3gate/owners"
	"github.com/web3gate/web3gate/products"
	"github.com/web3gate/web3gate/quotas"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr"
	"github.com/web3gate/web3gate/upstreams"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/webhooks"
)

// components is the server, in start order: each component uses only those above it, and
// stops before them. The single-replica jobs (webhook delivery, confirmers, owners
// indexers) hold leases, so they come after the leases and stop before them. The listeners'
// addresses are bound first, so that a port in use fails the start at once, before any
// migration runs or the dev chain starts; they are served last, so that they drain before
// anything they call stops, the public one before the admin one, so that /healthz answering
// means the public listener accepts.
func (a *App) components() []Component {
	return []Component{
		{Name: "listeners", Start: a.bindListeners, Stop: a.closeListeners},
		{Name: "admin tokens", Start: a.startAdminAuth},
		{Name: "tracing", Start: a.startTracing, Stop: a.stopTracing},
		{Name: "store", Start: a.startStore, Stop: func(context.Context) error { return a.db.Close() }},
		{Name: "leases", Start: a.startLeases, Stop: func(context.Context) error { return a.leases.Close() }},
		{Name: "quotas", Start: a.startQuotas, Stop: a.stopQuotas},
		{Name: "webhooks", Start: a.startWebhooks, Stop: a.hookWorker.stop},
		{Name: "keys", Start: a.startKeys, Stop: func(context.Context) error { return a.signers.Close() }},
		{Name: "devchain", Start: a.startDevchain, Stop: a.stopDevchain},
		{Name: "upstreams", Start: a.startUpstreams, Stop: func(context.Context) error { a.ups.Close(); return nil }},
		{Name: "transactions", Start: a.startTransactions, Stop: a.txWorker.stop},
		{Name: "redis", Start: a.startRedis, Stop: func(context.Context) error { a.redis.Close(); return nil }},
		{Name: "metadata", Start: a.startMetadata, Stop: func(context.Context) error { a.metadata.Close(); return nil }},
		{Name: "owners", Start: a.startOwners, Stop: func(context.Context) error { a.owners.Close(); return nil }},
		{Name: "products", Start: a.startProducts},
		{Name: "feeds", Start: a.startFeeds, Stop: func(context.Context) error { a.feeds.Close(); return nil }},
		{Name: "ratelimit", Start: a.startLimiter},
		{Name: "filters", Start: a.startFilters, Stop: func(context.Context) error { a.filters.Close(); return nil }},
		{Name: "stages", Start: a.startStages, Stop: func(context.Context) error { a.cache.Close(); return nil }},
		{Name: "api listener", Start: a.startAPI, Stop: a.stopAPI},
		{Name: "admin listener", Start: a.startAdmin, Stop: a.stopAdmin},
	}
}

func (a *App) startStore(ctx context.Context) (err error) {
	a.db, err = store.Open(ctx, a.cfg.Store, store.Deps{Logger: a.log.Named("store")})
	if err == nil {
		a.db.RegisterMetrics(a.reg, a.cfg.Admin.ReadyTimeout)
	}
	return err
}

// startLeases opens the leases of the jobs that run on one replica at a time: advisory
// locks of the PostgreSQL store, rows of any other.
func (a *App) startLeases(context.Context) (err error) {
	a.leases, err = lease.Open(a.cfg.Cluster, a.db, lease.Deps{Logger: a.log.Named("lease"), Registry: a.reg})
	return err
}

// startQuotas starts the quota book: usage per client id (when quotas.enabled), flushed to
// the store; its last flush runs at its stop.
func (a *App) startQuotas(context.Context) (err error) {
	a.quotas, err = quotas.New(a.cfg.Quotas, quotas.Deps{DB: a.db, Logger: a.log.Named("quotas"), Registry: a.reg})
	if err != nil {
		return err
	}
	a.quotas.Start()
	return nil
}

func (a *App) stopQuotas(context.Context) error {
	if err := a.quotas.Close(); err != nil {
		return fmt.Errorf("usage not flushed at shutdown: %w", err)
	}
	return nil
}

// startWebhooks writes the configured endpoints into the store before any state change of
// this run (the abandonment of a chain that started over included), then delivers the
// outbox under the lease "webhooks".
func (a *App) startWebhooks(ctx context.Context) (err error) {
	cfg := a.cfg.Webhooks
	cfg.Admin.Tokens = a.adminAuth.list
	a.hooks, err = webhooks.New(cfg, webhooks.Deps{DB: a.db, Logger: a.log.Named("webhooks"), Registry: a.reg, Hold: a.leases.Hold})
	if err != nil {
		return err
	}
	if err := a.hooks.Sync(ctx); err != nil {
		return err
	}
	a.hookWorker.start(ctx, a.hooks.Run)
	return nil
}

// startKeys opens the key store, the hardware key backends configured (wallet.pkcs11,
// wallet.awskms) and
// the accounts of the principals.
func (a *App) startKeys(ctx context.Context) (err error) {
	a.keys, err = openKeys(a.cfg, a.db, a.log.Named("wallet"))
	if err != nil {
		return err
	}
	backends, err := OpenKeyBackends(ctx, a.cfg, a.log.Named("wallet"))
	if err != nil {
		return err
	}
	a.signers = wallet.NewSigners(a.keys, wallet.SignersDeps{Logger: a.log.Named("wallet"), Store: a.db,
		Backends: backends, Registry: a.reg})
	a.accounts = wallet.NewAccountsOf(a.signers, a.db)
	return nil
}

// startDevchain starts the embedded dev chain (devchain.enabled) and gives its funded
// accounts to wallet.devPrincipal.
func (a *App) startDevchain(ctx context.Context) error {
	a.embedded = map[uint64]http.Handler{}
	if !a.cfg.Devchain.Enabled {
		return nil
	}
	dc, err := devchain.Start(a.cfg.Devchain, devchain.Deps{Logger: a.log})
	if err != nil {
		return err
	}
	devKeys := make([]*ecdsa.PrivateKey, 0, len(dc.Accounts()))
	for _, acct := range dc.Accounts() {
		devKeys = append(devKeys, acct.Key)
	}
	if err := a.accounts.AdoptDev(ctx, a.cfg.Wallet.DevPrincipal, devKeys); err != nil {
		_ = dc.Close()
		return fmt.Errorf("dev accounts: %w", err)
	}
	a.dev = dc
	a.embedded[dc.ChainID()] = dc.Handler()
	return nil
}

func (a *App) stopDevchain(context.Context) error {
	if a.dev == nil {
		return nil
	}
	return a.dev.Close()
}

func (a *App) startUpstreams(ctx context.Context) (err error) {
	a.ups, err = upstreams.New(a.cfg.Upstreams, upstreams.Deps{Logger: a.log.Named("upstreams"), Registry: a.reg, Embedded: a.embedded,
		TrackFinality: a.cfg.Cache.Enabled, FinalityDepth: a.cfg.Cache.FinalityDepth, Tracer: a.tracer("upstreams")})
	if err != nil {
		return err
	}
	a.ups.Start(ctx)
	return nil
}

// startTransactions starts the nonce manager. A chain whose genesis differs from the one
// recorded started over (the embedded chain does at every start): its stored transactions
// are abandoned here, before the confirmers' recovery, and the components below drop its
// metadata records, owners index and cached answers.
func (a *App) startTransactions(ctx context.Context) (err error) {
	chains := map[uint64]txmgr.Chain{}
	for _, p := range a.ups.Pools() {
		chains[p.ChainID()] = p
	}
	a.txs, err = txmgr.New(a.cfg.Wallet.Transactions, txmgr.Deps{Signers: a.signers, DB: a.db, Chains: chains,
		Logger: a.log.Named("transactions"), Hold: a.leases.Hold, Shared: a.cfg.Store.Driver == store.DriverPostgres, Registry: a.reg,
		Tracer: a.tracer("txmgr")})
	if err != nil {
		return err
	}
	a.renewed = a.txs.CheckGeneses(ctx, slices.Collect(maps.Keys(a.embedded)))
	for id := range a.embedded {
		a.renewed[id] = true
	}
	a.txWorker.start(ctx, a.txs.Run)
	return nil
}

// startRedis connects Redis, when configured: the second level of the response cache and
// of the metadata records, shared by the replicas.
func (a *App) startRedis(context.Context) (err error) {
	a.redis, err = redisx.New(a.cfg.Redis, redisx.Deps{Logger: a.log.Named("redis"), Registry: a.reg})
	return err
}

func (a *App) startMetadata(ctx context.Context) (err error) {
	a.metadata, err = metadata.New(a.cfg.Metadata, metadata.Deps{
		Chain: func(id uint64) (metadata.Chain, bool) {
			if p, ok := a.ups.Pool(id); ok {
				return p, true
			}
			return nil, false
		},
		DB: a.db, Registry: a.reg, Logger: a.log.Named("metadata"), Redis: a.redis, Shared: sharedChains(a.cfg),
	})
	if err != nil {
		return err
	}
	for id := range a.renewed {
		if err := a.metadata.ForgetChain(ctx, id); err != nil {
			a.metadata.Close()
			return err
		}
	}
	return nil
}

// startOwners starts the owners indexers; the index of a chain that started over is
// rebuilt from its blocks.
func (a *App) startOwners(ctx context.Context) (err error) {
	a.owners, err = owners.New(a.cfg.Owners, owners.Deps{
		Chain: func(id uint64) (owners.Chain, bool) {
			if p, ok := a.ups.Pool(id); ok {
				return p, true
			}
			return nil, false
		},
		DB: a.db, Tokens: a.metadata, Registry: a.reg, Logger: a.log.Named("owners"), Hold: a.leases.Hold,
	})
	if err != nil {
		return err
	}
	for id := range a.renewed {
		if err := a.owners.ForgetChain(ctx, id); err != nil {
			return err
		}
	}
	a.owners.Start()
	return nil
}

// startProducts opens the product catalog. The products of a contract the owners indexer
// follows count totalSold from the chain.
func (a *App) startProducts(ctx context.Context) (err error) {
	cfg := a.cfg.Products
	cfg.Admin.Tokens = a.adminAuth.list
	a.catalog, err = products.New(ctx, cfg, products.Deps{
		DB: a.db, Networks: products.NetworkChains(a.cfg.Upstreams), Logger: a.log.Named("products"),
		Scope: products.IndexScope{Chains: a.cfg.Owners.Scope()},
	})
	return err
}

// startFeeds starts one live feed per chain, shared by every WebSocket subscription and
// HTTP filter; it stops after the listeners (their sockets closed first).
func (a *App) startFeeds(context.Context) (err error) {
	chains := map[uint64]feeds.Chain{}
	for _, p := range a.ups.Pools() {
		chains[p.ChainID()] = p
	}
	sockets := map[uint64][]string{}
	for _, c := range a.cfg.Upstreams.Chains {
		sockets[c.ChainID] = c.WSURLs
	}
	a.feeds, err = feeds.New(a.cfg.Feeds, feeds.Deps{Chains: chains, Logger: a.log.Named("feeds"), Registry: a.reg, Sockets: sockets})
	return err
}

// startFilters starts the HTTP filters: their state in the store (any replica serves a
// poll), their changes from the feeds, and the sweeper of the expired ones. With rate
// limits on, eth_getFilterLogs and the polls of logs filters are charged by their block
// range through the rate-limit stage (built before).
func (a *App) startFilters(context.Context) (err error) {
	names := map[uint64]string{}
	for _, p := range a.ups.Pools() {
		names[p.ChainID()] = p.Name()
	}
	var charger filters.Charger
	if a.cfg.RateLimit.Enabled {
		charger = a.limiter
	}
	a.filters, err = filters.New(a.cfg.Filters, filters.Deps{DB: a.db, Chains: names, Logger: a.log.Named("filters"), Registry: a.reg,
		Charger: charger,
		Feed: func(id uint64) (filters.Feed, bool) {
			if f, ok := a.feeds.Feed(id); ok {
				return f, true
			}
			return nil, false
		}})
	if err != nil {
		return err
	}
	a.filters.Start()
	return nil
}

// openKeys opens the keystore (the directory, or the store with wallet.keys.backend store).
// Without a passphrase configured and with no key files, the server runs with in-memory
// keys only (the dev chain's accounts); key files without a passphrase are an error.
func openKeys(cfg *config.Config, db *store.DB, log *zap.Logger) (*wallet.Keys, error) {
	deps := wallet.Deps{Logger: log, Store: db}
	keys, err := wallet.OpenKeys(cfg.Wallet.Keys, deps)
	if !errors.Is(err, wallet.ErrNoPassphrase) {
		return keys, err
	}
	has, herr := wallet.HasKeyFiles(cfg.Wallet.Keys, deps)
	if herr != nil {
		return nil, herr
	}
	if has && cfg.Wallet.Keys.Backend == wallet.KeysBackendStore {
		return nil, fmt.Errorf("the store holds keys (wallet.keys.backend: store): %w", err)
	}
	if has {
		return nil, fmt.Errorf("keystore %s holds keys: %w", cfg.Wallet.Keys.Dir, err)
	}
	log.Info("no keystore passphrase configured: signing with in-memory keys only", zap.String("env", cfg.Wallet.Keys.PassphraseEnv))
	return wallet.MemoryKeys(wallet.Deps{Logger: log}), nil
}
