// Package app is the web3gate server as a library: the ordered list of its components
// (components.go), the route tables of its two listeners (routes.go, admin.go), and Run,
// which starts the components in order, serves until its context ends and stops them in
// reverse. The command line (internal/cli) and the whole-server tests (integration/) both
// start the server through Run.
package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

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
	"github.com/web3gate/web3gate/middleware/sign"
	"github.com/web3gate/web3gate/owners"
	"github.com/web3gate/web3gate/products"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/quotas"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr"
	"github.com/web3gate/web3gate/upstreams"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/webhooks"
)

// Options are what the server takes besides its configuration.
type Options struct {
	// Version is the build's version: logged at start and answered by web3_clientVersion.
	Version string
	// Log receives the process's log lines (JSON); nil: standard error.
	Log io.Writer
	// Ready, when not nil, is called with the bound addresses once both listeners accept
	// connections.
	Ready func(api, admin net.Addr)
}

// App is one web3gate server: its components and what they built. Each field is set by
// the component that owns it (components.go) and used by those started after it.
type App struct {
	cfg  *config.Config
	opts Options
	log  *zap.Logger
	reg  *prometheus.Registry

	db       *store.DB
	leases   *lease.Leases
	quotas   *quotas.Book
	hooks    *webhooks.Service
	keys     *wallet.Keys
	accounts *wallet.Accounts
	dev      *devchain.Chain
	embedded map[uint64]http.Handler // the chains served in process, by chain id
	ups      *upstreams.Set
	txs      *txmgr.Manager
	// renewed are the chains that started over since the state was recorded (the embedded
	// dev chain at every start): their stored records are dropped or rebuilt.
	renewed  map[uint64]bool
	redis    *redisx.Client // nil: no Redis configured
	metadata *metadata.Service
	owners   *owners.Service
	catalog  *products.Service
	feeds    *feeds.Set
	filters  *filters.Stage
	limiter  *ratelimit.Stage
	auth     *auth.Stage
	oauth    *auth.OAuth
	cache    *cache.Stage
	signer   *sign.Stage
	rpc      proxy.Handler // the compiled stage chain of the JSON-RPC routes
	server   *proxy.Server
	// adminServer serves the admin routes (admin.go).
	adminServer *http.Server

	hookWorker, txWorker worker
	api, admin           *listener
	failed               chan error // a listener that stopped serving on its own
	started              []Component
}

// New builds the server of cfg; nothing runs until Start. It fails only on a log level
// it cannot parse.
func New(cfg *config.Config, opts Options) (*App, error) {
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	log, err := NewLogger(cfg.Log.Level, cfg.Cluster.ReplicaID, opts.Log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{Name: "web3gate_replica_info",
		Help: "1, labeled with this process's replica id (cluster.replicaId)."}, []string{"replica"}).
		WithLabelValues(cfg.Cluster.ReplicaID).Set(1)
	return &App{cfg: cfg, opts: opts, log: log, reg: reg, failed: make(chan error, 2)}, nil
}

// Run serves cfg until ctx ends, then drains and stops everything it started.
func Run(ctx context.Context, cfg *config.Config, opts Options) error {
	a, err := New(cfg, opts)
	if err != nil {
		return err
	}
	defer func() { _ = a.log.Sync() }()
	if err := a.Start(ctx); err != nil {
		return err
	}
	if opts.Ready != nil {
		opts.Ready(a.api.ln.Addr(), a.admin.ln.Addr())
	}
	a.log.Info("serving",
		zap.String("listen", a.api.ln.Addr().String()),
		zap.String("admin", a.admin.ln.Addr().String()),
		zap.Uint64("mainnet", cfg.Upstreams.Mainnet),
		zap.String("version", opts.Version))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-a.failed:
	}
	a.log.Info("shutting down", zap.Duration("drain", cfg.Server.ShutdownTimeout))
	a.Stop()
	if serveErr != nil {
		return serveErr
	}
	a.log.Info("stopped")
	return nil
}

// Start starts the components in order (components.go). When one fails, those started
// before it are stopped in reverse order and the error names the component.
func (a *App) Start(ctx context.Context) error {
	started, err := startAll(ctx, a.log, a.components(), a.stopContext)
	a.started = started
	return err
}

// Stop stops the started components in reverse order. The listeners drain within
// server.shutdownTimeout.
func (a *App) Stop() {
	ctx, cancel := a.stopContext()
	defer cancel()
	_ = stopAll(ctx, a.log, a.started)
	a.started = nil
}

func (a *App) stopContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.cfg.Server.ShutdownTimeout)
}

// Handler is the public listener's request handler, for benchmarks that serve requests
// without a socket. It is nil before Start.
func (a *App) Handler() fasthttp.RequestHandler {
	if a.server == nil {
		return nil
	}
	return a.server.Handler()
}

// Logger is the server's root logger.
func (a *App) Logger() *zap.Logger { return a.log }
