package main

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/middleware/cache"
	"github.com/web3gate/web3gate/middleware/filters"
	"github.com/web3gate/web3gate/middleware/ratelimit"
	"github.com/web3gate/web3gate/middleware/route"
	"github.com/web3gate/web3gate/middleware/sign"
	"github.com/web3gate/web3gate/middleware/subscribe"
	"github.com/web3gate/web3gate/owners"
	"github.com/web3gate/web3gate/products"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/quotas"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/webhooks"
)

func loadConfig(path string) (*config.Config, error) {
	return config.Load(path)
}

// newLogger is the process's root logger: JSON lines on w, each with the replica id (field
// replica).
func newLogger(level, replica string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core).With(zap.String("replica", replica)), nil
}

// run serves until ctx ends, then drains and stops everything it started. ready, when not
// nil, is called with the bound addresses once both listeners accept connections.
func run(ctx context.Context, cfg *config.Config, logw io.Writer, ready func(api, admin net.Addr)) error {
	log, err := newLogger(cfg.Log.Level, cfg.Cluster.ReplicaID, logw)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{Name: "web3gate_replica_info",
		Help: "1, labeled with this process's replica id (cluster.replicaId)."}, []string{"replica"}).
		WithLabelValues(cfg.Cluster.ReplicaID).Set(1)

	db, err := store.Open(ctx, cfg.Store, store.Deps{Logger: log.Named("store")})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer func() { _ = db.Close() }()
	// The jobs that run on one replica at a time hold leases: advisory locks of the
	// PostgreSQL store, rows of any other (README "Running several replicas"). They stop
	// before the leases close (defers run last first), and the leases before the store.
	leases, err := lease.Open(cfg.Cluster, db,
		lease.Deps{Logger: log.Named("lease"), Registry: reg})
	if err != nil {
		return err
	}
	defer func() { _ = leases.Close() }()
	// The quota book records usage per client id (when quotas.enabled) and flushes it to the
	// store; its last flush runs before the store closes (defers run last first).
	quotas, err := quotas.New(cfg.Quotas, quotas.Deps{DB: db, Logger: log.Named("quotas"), Registry: reg})
	if err != nil {
		return err
	}
	quotas.Start()
	defer func() {
		if err := quotas.Close(); err != nil {
			log.Warn("quota usage not flushed at shutdown", zap.Error(err))
		}
	}()
	// The webhook deliverer: the configured endpoints written into the store before any state
	// change of this run (the abandonment of a chain that started over included), then the
	// outbox delivered under the lease "webhooks"; it stops before the leases and the store
	// close (defers run last first).
	hooks, err := webhooks.New(cfg.Webhooks, webhooks.Deps{DB: db, Logger: log.Named("webhooks"), Registry: reg, Hold: leases.Hold})
	if err != nil {
		return err
	}
	if err := hooks.Sync(ctx); err != nil {
		return err
	}
	hooksCtx, stopHooks := context.WithCancel(context.WithoutCancel(ctx))
	hooksDone := make(chan struct{})
	go func() { defer close(hooksDone); hooks.Run(hooksCtx) }()
	defer func() { stopHooks(); <-hooksDone }()

	keys, err := openKeys(cfg, db, log.Named("wallet"))
	if err != nil {
		return err
	}
	accounts := wallet.NewAccounts(keys, db)

	embedded := map[uint64]http.Handler{}
	if cfg.Devchain.Enabled {
		dc, err := devchain.Start(cfg.Devchain, devchain.Deps{Logger: log})
		if err != nil {
			return fmt.Errorf("dev chain: %w", err)
		}
		defer func() { _ = dc.Close() }()
		embedded[dc.ChainID()] = dc.Handler()
		devKeys := make([]*ecdsa.PrivateKey, 0, len(dc.Accounts()))
		for _, a := range dc.Accounts() {
			devKeys = append(devKeys, a.Key)
		}
		if err := accounts.AdoptDev(ctx, cfg.Wallet.DevPrincipal, devKeys); err != nil {
			return fmt.Errorf("dev accounts: %w", err)
		}
	}
	ups, err := upstreams.New(cfg.Upstreams, upstreams.Deps{Logger: log.Named("upstreams"), Registry: reg, Embedded: embedded,
		TrackFinality: cfg.Cache.Enabled, FinalityDepth: cfg.Cache.FinalityDepth})
	if err != nil {
		return fmt.Errorf("upstreams: %w", err)
	}
	ups.Start(ctx)
	defer ups.Close()

	chains := map[uint64]wallet.Chain{}
	for _, p := range ups.Pools() {
		chains[p.ChainID()] = p
	}
	txs, err := wallet.NewTransactions(cfg.Wallet.Transactions, wallet.TxDeps{Keys: keys, DB: db, Chains: chains, Logger: log.Named("transactions"),
		Hold: leases.Hold, Shared: cfg.Store.Driver == store.DriverPostgres, Registry: reg})
	if err != nil {
		return err
	}
	// A chain whose genesis differs from the one recorded started over (the embedded chain
	// does at every start): its stored transactions are abandoned here, before the
	// confirmers' recovery, and its metadata records and owners index dropped below.
	renewed := txs.CheckGeneses(ctx, slices.Collect(maps.Keys(embedded)))
	for id := range embedded {
		renewed[id] = true
	}
	// The confirmers stop before the upstreams and the store close (defers run last first).
	txCtx, stopTxs := context.WithCancel(context.WithoutCancel(ctx))
	txDone := make(chan struct{})
	go func() { defer close(txDone); txs.Run(txCtx) }()
	defer func() { stopTxs(); <-txDone }()

	signStage, err := sign.New(sign.Deps{Accounts: accounts, Keys: keys, Transactions: txs})
	if err != nil {
		return err
	}

	// Redis, when configured, is the second level of the response cache and the metadata
	// records' cache, shared by the replicas; it closes after both (defers run last first).
	rc, err := redisx.New(cfg.Redis, redisx.Deps{Logger: log.Named("redis"), Registry: reg})
	if err != nil {
		return err
	}
	defer rc.Close()
	shared := sharedChains(cfg)

	md, err := metadata.New(cfg.Metadata, metadata.Deps{
		Chain: func(id uint64) (metadata.Chain, bool) {
			if p, ok := ups.Pool(id); ok {
				return p, true
			}
			return nil, false
		},
		DB: db, Registry: reg, Logger: log.Named("metadata"), Redis: rc, Shared: shared,
	})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	defer md.Close()
	for id := range renewed {
		if err := md.ForgetChain(ctx, id); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
	}

	// The owners indexers stop before the metadata service, the upstreams and the store
	// (defers run last first); the index of a chain that started over is rebuilt from its blocks.
	own, err := owners.New(cfg.Owners, owners.Deps{
		Chain: func(id uint64) (owners.Chain, bool) {
			if p, ok := ups.Pool(id); ok {
				return p, true
			}
			return nil, false
		},
		DB: db, Tokens: md, Registry: reg, Logger: log.Named("owners"), Hold: leases.Hold,
	})
	if err != nil {
		return err
	}
	for id := range renewed {
		if err := own.ForgetChain(ctx, id); err != nil {
			return err
		}
	}
	own.Start()
	defer own.Close()

	catalog, err := products.New(ctx, cfg.Products, products.Deps{
		DB: db, Networks: products.NetworkChains(cfg.Upstreams), Logger: log.Named("products"),
		// The products of a contract the owners indexer follows count totalSold from the
		// chain (README "Products", sold from the chain).
		Scope: products.IndexScope{Chains: cfg.Owners.Scope()},
	})
	if err != nil {
		return err
	}

	clientsAdmin, err := auth.NewClientsAdmin(cfg.Auth.OAuth.Admin, auth.ClientsAdminDeps{Clients: db, Logger: log.Named("oauth")})
	if err != nil {
		return err
	}

	// One live feed per chain, shared by every WebSocket subscription and HTTP filter; it
	// stops after the server (its sockets closed first) and before the upstreams (defers run
	// last first).
	fs, err := feeds.New(cfg.Feeds, feeds.Deps{Chains: feedChains(ups), Logger: log.Named("feeds"), Registry: reg})
	if err != nil {
		return fmt.Errorf("feeds: %w", err)
	}
	defer fs.Close()
	// The HTTP filters: state in the store (any replica serves a poll), changes from the
	// feeds; the sweeper stops before the feeds and the store close.
	filterStage, err := newFilterStage(cfg, db, ups, fs, log, reg)
	if err != nil {
		return err
	}
	defer filterStage.Close()

	limiter, err := newLimiter(cfg, log, reg, rc, ups, quotas)
	if err != nil {
		return err
	}
	routes, cacheStage, authStage, err := buildRoutes(ctx, cfg, log, reg, ups, signStage, filterStage, db, fs, limiter, cache.Deps{Redis: rc, Shared: shared})
	if err != nil {
		return err
	}
	defer cacheStage.Close()
	forgetCtx, cancelForget := context.WithTimeout(ctx, 30*time.Second)
	defer cancelForget()
	for id := range renewed {
		if n, err := cacheStage.ForgetChain(forgetCtx, id); err != nil {
			log.Warn("the chain's cached answers in Redis were not all dropped; they expire after redis.maxTtl",
				zap.Uint64("chain", id), zap.Int("dropped", n), zap.String("error", err.Error()))
		}
	}
	routes = append(routes,
		// The public REST routes: limited per client id or source address (rateLimit.rest).
		&proxy.Route{Name: "token", Method: http.MethodGet, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}/{tokenId}", REST: limiter.REST(md.TokenHandler())},
		&proxy.Route{Name: "contract", Method: http.MethodGet, Pattern: "/v1/tokens/{coinType}/{chainId}/{contractAddress}", REST: limiter.REST(md.ContractHandler())},
		&proxy.Route{Name: "owners", Method: http.MethodGet, Pattern: "/v1/owners", REST: limiter.REST(own.Handler())},
		&proxy.Route{Name: "products", Method: http.MethodGet, Pattern: "/v1/products", REST: limiter.REST(catalog.ListHandler())},
	)

	srv, err := proxy.New(cfg.Server, proxy.Deps{
		Logger:   log.Named("proxy"),
		Registry: reg,
		Routes:   routes,
		KnownChain: func(id uint64) bool {
			_, ok := ups.Pool(id)
			return ok
		},
		Verifier: authStage,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Server.Listen, err)
	}
	adminLn, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("admin listen %s: %w", cfg.Admin.Listen, err)
	}
	// ReadTimeout bounds the bodies of the admin product API as well as the headers.
	admin := &http.Server{Handler: adminMux(adminDeps{reg: reg, ups: ups, db: db, readyTimeout: cfg.Admin.ReadyTimeout, redis: rc, leases: leases,
		products: catalog.AdminHandler(), clients: clientsAdmin, usage: quotas.AdminHandler(), webhooks: hooks.AdminHandler()}), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() { errc <- admin.Serve(adminLn) }()
	if ready != nil {
		ready(ln.Addr(), adminLn.Addr())
	}
	log.Info("serving",
		zap.String("listen", ln.Addr().String()),
		zap.String("admin", adminLn.Addr().String()),
		zap.Uint64("mainnet", cfg.Upstreams.Mainnet),
		zap.String("version", version))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("shutting down", zap.Duration("drain", cfg.Server.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("drain incomplete", zap.Error(err))
	}
	if err := admin.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("admin shutdown", zap.Error(err))
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	log.Info("stopped")
	return nil
}

// feedChains are the upstream pools by chain id, for the feeds.
func feedChains(ups *upstreams.Set) map[uint64]feeds.Chain {
	chains := map[uint64]feeds.Chain{}
	for _, p := range ups.Pools() {
		chains[p.ChainID()] = p
	}
	return chains
}

// newFilterStage builds the HTTP filters stage on the store and the chains' feeds, and
// starts its sweeper (Close stops it).
func newFilterStage(cfg *config.Config, db *store.DB, ups *upstreams.Set, fs *feeds.Set, log *zap.Logger, reg prometheus.Registerer) (*filters.Stage, error) {
	names := map[uint64]string{}
	for _, p := range ups.Pools() {
		names[p.ChainID()] = p.Name()
	}
	st, err := filters.New(cfg.Filters, filters.Deps{DB: db, Chains: names, Logger: log.Named("filters"), Registry: reg,
		Feed: func(id uint64) (filters.Feed, bool) {
			if f, ok := fs.Feed(id); ok {
				return f, true
			}
			return nil, false
		}})
	if err != nil {
		return nil, err
	}
	st.Start()
	return st, nil
}

// buildRoutes compiles the stage chains of the public routes, once; limiter is the
// rate-limit stage, right after auth when rateLimit.enabled. cacheDeps brings the
// response cache's shared level (Redis and the chains it holds); fs the chains' live feeds,
// for eth_subscribe; filterStage (nil: none) answers the HTTP filter methods before the
// cache. It returns the auth stage too, which verifies WebSocket upgrades.
func buildRoutes(ctx context.Context, cfg *config.Config, log *zap.Logger, reg prometheus.Registerer, ups *upstreams.Set, signer *sign.Stage, filterStage *filters.Stage, db *store.DB, fs *feeds.Set, limiter *ratelimit.Stage, cacheDeps cache.Deps) ([]*proxy.Route, *cache.Stage, *auth.Stage, error) {
	tokens, err := auth.NewStaticTokens(cfg.Auth.Tokens)
	if err != nil {
		return nil, nil, nil, err
	}
	oauth, err := auth.NewOAuth(ctx, cfg.Auth.OAuth, auth.OAuthDeps{Clients: db, Logger: log.Named("oauth"), Registry: reg})
	if err != nil {
		return nil, nil, nil, err
	}
	authStage, err := auth.New(cfg.Auth, auth.Deps{Verifier: oauth.Chain(tokens)})
	if err != nil {
		return nil, nil, nil, err
	}
	chains := make([]uint64, 0, len(cfg.Upstreams.Chains))
	for _, ch := range cfg.Upstreams.Chains {
		chains = append(chains, ch.ChainID)
	}
	routeStage, err := route.New(cfg.Routing, route.Deps{ClientVersion: "web3gate/" + version, Chains: chains, Signing: signer != nil})
	if err != nil {
		return nil, nil, nil, err
	}
	subscribeStage, err := subscribe.New(subscribe.Deps{Feeds: fs})
	if err != nil {
		return nil, nil, nil, err
	}
	cacheDeps.Registry = reg
	cacheDeps.Head = func(id uint64) uint64 {
		if p, ok := ups.Pool(id); ok {
			return p.Head()
		}
		return 0
	}
	cacheDeps.Finality = func(id uint64) cache.Finality {
		p, ok := ups.Pool(id)
		if !ok {
			return cache.Finality{}
		}
		f := p.Finality()
		return cache.Finality{Known: f.Known, Head: f.Head, HeadHash: f.HeadHash, Finalized: f.Finalized}
	}
	cacheStage, err := cache.New(cfg.Cache, cacheDeps)
	if err != nil {
		return nil, nil, nil, err
	}
	stages := []proxy.Stage{authStage}
	if cfg.RateLimit.Enabled {
		stages = append(stages, limiter)
	}
	stages = append(stages, routeStage, subscribeStage)
	if filterStage != nil {
		stages = append(stages, filterStage)
	}
	stages = append(stages, cacheStage)
	if signer != nil {
		stages = append(stages, signer)
	}
	chain := proxy.Compile(ups, stages...)
	routes := []*proxy.Route{
		{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet", ChainID: cfg.Upstreams.Mainnet, Handler: chain},
		{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}", Handler: chain},
		// The same with the client id in the path, for wallets that take only a URL.
		{Name: "mainnet", Method: http.MethodPost, Pattern: "/v1/web3/mainnet/{" + proxy.ClientIDParam + "}", ChainID: cfg.Upstreams.Mainnet, Handler: chain},
		{Name: "chains", Method: http.MethodPost, Pattern: "/v1/web3/chains/{chain_id}/{" + proxy.ClientIDParam + "}", Handler: chain},
		{Name: "oauth2_token", Method: http.MethodPost, Pattern: "/v1/oauth2/token", REST: oauth.TokenHandler()},
		{Name: "oauth2_jwks", Method: http.MethodGet, Pattern: "/v1/oauth2/jwks", REST: oauth.JWKSHandler()},
	}
	if signer != nil {
		routes = append(routes, &proxy.Route{Name: "transaction", Method: http.MethodGet, Pattern: "/v1/transactions/{hash}",
			REST: signer.TransactionHandler(authStage)},
			&proxy.Route{Name: "transaction_speedup", Method: http.MethodPost, Pattern: "/v1/transactions/{hash}/speedup",
				REST: signer.SpeedupHandler(authStage)},
			&proxy.Route{Name: "transaction_cancel", Method: http.MethodPost, Pattern: "/v1/transactions/{hash}/cancel",
				REST: signer.CancelHandler(authStage)})
	}
	return routes, cacheStage, authStage, nil
}

// newLimiter builds the rate-limit stage (of the JSON-RPC routes and the REST ones), its
// budgets shared through Redis when rc is not nil; the exchanges it allows are charged to
// quotas (when quotas.enabled).
func newLimiter(cfg *config.Config, log *zap.Logger, reg prometheus.Registerer, rc *redisx.Client, ups *upstreams.Set, quotas *quotas.Book) (*ratelimit.Stage, error) {
	clients := map[string]bool{}
	for _, c := range cfg.Auth.Clients {
		clients[c.ID] = true
	}
	var q ratelimit.Quotas
	if cfg.Quotas.Enabled {
		q = quotas
	}
	return ratelimit.New(cfg.RateLimit, ratelimit.Deps{
		Registry: reg, Logger: log.Named("ratelimit"), Redis: rc,
		Head: func(id uint64) uint64 {
			if p, ok := ups.Pool(id); ok {
				return p.Head()
			}
			return 0
		},
		KnownClient: func(id string) bool { return clients[id] },
		Quotas:      q,
	})
}

// adminDeps are what the admin listener serves from.
type adminDeps struct {
	reg               *prometheus.Registry
	ups               *upstreams.Set
	db                *store.DB
	readyTimeout      time.Duration
	redis             *redisx.Client // nil: no Redis configured
	leases            *lease.Leases
	products, clients http.Handler
	usage             http.Handler // GET /v1/admin/usage (quotas)
	webhooks          http.Handler // the webhook admin API
}

// adminMux serves /metrics, /healthz (the process is up), /readyz (every chain has a
// healthy upstream and the store answers), /leases (the leases this replica holds), the admin
// product API, the OAuth client admin API, the quota usage of a client id and the webhook
// admin API.
//
// /readyz also says, when Redis is configured, whether it is in use. A Redis outage leaves
// the replica ready (200): it serves from its local caches and the upstreams, and taking
// every replica out of the load balancer because their shared cache is down would turn a
// slower service into none. A store that does not answer within admin.readyTimeout makes it
// unready (503): every account, nonce and transaction lives there.
func adminMux(d adminDeps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /leases", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Replica string       `json:"replica"`
			Leases  []lease.Held `json:"leases"`
		}{d.leases.Replica(), d.leases.HeldLeases()})
	})
	mux.Handle(products.AdminPath, d.products)
	mux.Handle(products.AdminPath+"/", d.products)
	mux.Handle(auth.ClientsAdminPath+"/", d.clients)
	mux.Handle(quotas.AdminPath, d.usage)
	mux.Handle(webhooks.AdminPath, d.webhooks)
	mux.Handle(webhooks.AdminPath+"/", d.webhooks)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		redis := ""
		switch {
		case d.redis == nil:
		case d.redis.Up():
			redis = `,"redis":"up"`
		default:
			redis = `,"redis":"down: serving from local caches"`
		}
		err := d.ups.Ready()
		if err == nil {
			ctx, cancel := context.WithTimeout(r.Context(), d.readyTimeout)
			err = d.db.Ping(ctx)
			cancel()
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, `{"status":"unavailable","reason":%q%s}`, err.Error(), redis)
			return
		}
		_, _ = io.WriteString(w, `{"status":"ok"`+redis+`}`)
	})
	return mux
}

// sharedChains reports whether a chain's cached answers and metadata records may go to
// Redis, which the replicas share: not those of a chain served by the embedded dev chain,
// which is this process's own (another replica's dev chain has the same id and other blocks,
// and it starts over at every start).
func sharedChains(cfg *config.Config) func(uint64) bool {
	private := map[uint64]bool{}
	for _, ch := range cfg.Upstreams.Chains {
		if slices.Contains(ch.URLs, "embedded") {
			private[ch.ChainID] = true
		}
	}
	return func(id uint64) bool { return !private[id] }
}

// openKeys opens the keystore (the directory, or db with wallet.keys.backend store).
// Without a passphrase configured and with no key files, the server runs with in-memory keys
// only (the dev chain's accounts); key files without a passphrase are an error.
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
