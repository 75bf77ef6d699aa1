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
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/internal/buildinfo"
	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/internal/redisx"
	"github.com/web3gate/web3gate/internal/tracing"
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
	// Version is the build's version: logged at start and answered by web3_clientVersion;
	// "" is the binary's own (internal/buildinfo).
	Version string
	// Log receives the process's log lines, in log.format; nil: standard error.
	Log io.Writer
	// Ready, when not nil, is called with the bound addresses once both listeners accept
	// connections.
	Ready func(api, admin net.Addr)
	// Draining, when not nil, is called once the server has begun to stop, with /readyz
	// answering 503 and both listeners still serving, before server.drainDelay runs.
	Draining func()
}

// App is one web3gate server: its components and what they built. Each field is set by
// the component that owns it (components.go) and used by those started after it.
type App struct {
	cfg  *config.Config
	opts Options
	log  *zap.Logger
	reg  *prometheus.Registry
	// flood bounds similar log lines (log.flood), the whole process's; floodWorker writes
	// its summaries.
	flood       *logx.Limiter
	floodWorker worker
	// draining is set once the server is stopping: /readyz answers 503 from then on.
	draining atomic.Bool

	db       *store.DB
	leases   *lease.Leases
	quotas   *quotas.Book
	hooks    *webhooks.Service
	keys     *wallet.Keys
	signers  *wallet.Signers // every account's signer: keystore, PKCS#11, AWS KMS
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

	adminAuth            *adminAuth        // the admin APIs' one token list (adminauth.go)
	tracing              *tracing.Provider // nil: tracing off (tracing.go)
	hookWorker, txWorker worker
	bound                bound // the listeners' sockets, bound first (listeners.go)
	api, admin           *listener
	failed               chan error // a listener that stopped serving on its own
	started              []Component
}

// New builds the server of cfg; nothing runs until Start. It fails only on a log level or
// format it cannot parse.
func New(cfg *config.Config, opts Options) (*App, error) {
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	build := buildinfo.Read()
	if opts.Version == "" {
		opts.Version = build.Version
	}
	build.Version = opts.Version
	log, err := NewLoggerFormat(cfg.Log.Level, cfg.Log.Format, cfg.Cluster.ReplicaID, opts.Log, IsTerminal(opts.Log))
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{Name: "web3gate_replica_info",
		Help: "1, labeled with this process's replica id (cluster.replicaId)."}, []string{"replica"}).
		WithLabelValues(cfg.Cluster.ReplicaID).Set(1)
	buildinfo.Register(reg, build)
	return &App{cfg: cfg, opts: opts, log: log, reg: reg, flood: logx.New(cfg.Log.Flood, nil), failed: make(chan error, 2)}, nil
}

// Run serves cfg until ctx ends, then drains (server.drainDelay: /readyz answers 503 while
// the listeners still serve) and stops everything it started in reverse order.
func Run(ctx context.Context, cfg *config.Config, opts Options) error {
	a, err := New(cfg, opts)
	if err != nil {
		return err
	}
	defer func() { _ = a.log.Sync() }()
	// The summaries of suppressed lines are written until everything else has stopped.
	a.floodWorker.start(ctx, a.flood.Run)
	defer func() { _ = a.floodWorker.stop(context.Background()) }()
	if err := a.Start(ctx); err != nil {
		return err
	}
	// Starting (the config, migrations, route tables, the dev chain's genesis) leaves a few
	// MiB of garbage that an idle process would hold until its first collection, up to two
	// minutes later: collect it and give the pages back now (docs/performance.md, (z)).
	debug.FreeOSMemory()
	if opts.Ready != nil {
		opts.Ready(a.api.ln.Addr(), a.admin.ln.Addr())
	}
	a.log.Info("serving",
		zap.String("listen", a.api.ln.Addr().String()),
		zap.String("admin", a.admin.ln.Addr().String()),
		zap.Uint64("mainnet", cfg.Upstreams.Mainnet),
		zap.String("version", a.opts.Version))

	var serveErr error
	select {
	case <-ctx.Done():
		serveErr = a.drain(cfg.Server.DrainDelay)
	case serveErr = <-a.failed:
		a.draining.Store(true)
	}
	a.log.Info("shutting down", zap.Duration("drain", cfg.Server.ShutdownTimeout))
	a.Stop()
	if serveErr != nil {
		return serveErr
	}
	a.log.Info("stopped")
	return nil
}

// drain turns /readyz to 503 and keeps the listeners serving for delay, so that the load
// balancers that check it stop sending requests before the listeners close. A listener that
// stops serving meanwhile ends the wait with its error.
func (a *App) drain(delay time.Duration) error {
	a.draining.Store(true)
	if a.opts.Draining != nil {
		a.opts.Draining()
	}
	if delay <= 0 {
		return nil
	}
	a.log.Info("draining: /readyz answers 503, the listeners still serve", zap.Duration("drainDelay", delay))
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case err := <-a.failed:
		return err
	}
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
