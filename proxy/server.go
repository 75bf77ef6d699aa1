// The Server: its dependencies, its construction, and serving the public API until Shutdown.

package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Deps are what a Server needs besides its config.
type Deps struct {
	Logger   *zap.Logger
	Registry prometheus.Registerer
	// Routes are the public routes, matched in order.
	Routes []*Route
	// KnownChain reports whether a chain id from a {chain_id} path param is configured.
	KnownChain func(chainID uint64) bool
	// Verifier authenticates a WebSocket's upgrade as the auth stage authenticates an
	// exchange (the auth stage itself); nil: the upgrade is not checked, and only the
	// messages are, by the chain of stages.
	Verifier Verifier
	// RequestLog is log.requests: the request log's sampling of successes.
	RequestLog RequestLogConfig
	// Flood bounds the request log's lines of failed requests per route and outcome
	// (log.flood); nil: a bound of its own, of the defaults.
	Flood *logx.Limiter
	// Tracer makes the spans of the requests (trace.go); nil: tracing off.
	Tracer trace.Tracer
	// TraceIncoming makes a request's traceparent the parent of its server span
	// (tracing.trustIncoming).
	TraceIncoming bool
}

// Server is the public fasthttp listener.
type Server struct {
	cfg     Config
	log     *zap.Logger
	router  *router
	known   func(uint64) bool
	metrics *metrics
	srv     *fasthttp.Server

	// ctx is the base of every call's context (a JSON-RPC call's is its exchange's, see
	// exchangeContext; a REST request's carries its request id). It is never canceled:
	// fasthttp gives no signal when a client goes away, upstream attempts carry their own
	// deadlines, and a context that cannot be canceled lets the pool make its requests
	// inline, without a goroutine each.
	ctx context.Context

	// flood bounds the request log's lines of failures; sample is the share of successes
	// logged (log.requests.sampleSuccess).
	flood  *logx.Limiter
	sample float64

	idPrefix string
	idSeq    atomic.Uint64
	bufs     sync.Pool

	maxBody int // MaxBodyBytes, or fasthttp's default when unset
	maxHead int // MaxHeaderBytes, or fasthttp's default when unset
	budget  bodyBudget
	limits  *connLimits // nil: no connection limits
	cors    *cors
	trusted []netip.Prefix // server.trustedProxies

	verifier Verifier   // of WebSocket upgrades; nil: none
	ws       *socketSet // nil: server.websocket disabled

	tracer        trace.Tracer // nil: tracing off (trace.go)
	traceIncoming bool
	spanNames     spanNames

	errBodyTooLarge, errBodiesInFlight *jsonrpc.Error
}

// New builds a Server; it listens once Serve is called.
func New(cfg Config, deps Deps) (*Server, error) {
	rt, err := newRouter(deps.Routes)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(deps.Registry, len(deps.Routes))
	if err != nil {
		return nil, err
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("request id prefix: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		log:      deps.Logger,
		router:   rt,
		known:    deps.KnownChain,
		metrics:  m,
		ctx:      context.Background(),
		idPrefix: hex.EncodeToString(rnd[:]) + "-",
		maxBody:  cfg.MaxBodyBytes,
		cors:     newCORS(cfg.CORS),
		trusted:  trustedPrefixes(cfg.TrustedProxies),
		verifier: deps.Verifier,
		flood:    newFlood(deps.Flood),
		sample:   deps.RequestLog.SampleSuccess,
	}
	if deps.Tracer != nil {
		s.tracer, s.traceIncoming, s.spanNames = deps.Tracer, deps.TraceIncoming, newSpanNames(deps.Routes)
	}
	if cfg.WebSocket.Enabled {
		s.ws = newSocketSet(cfg.WebSocket, m)
	}
	if s.maxBody <= 0 {
		s.maxBody = fasthttp.DefaultMaxRequestBodySize
	}
	s.maxHead = cfg.MaxHeaderBytes
	if s.maxHead <= 0 {
		s.maxHead = 4096 // fasthttp's default read buffer
	}
	s.budget.limit = int64(cfg.MaxBodyBytesInFlight)
	if cfg.FreeMemoryAfterDrop > 0 {
		f := &memFreer{drop: int64(cfg.FreeMemoryAfterDrop), runs: m.memoryFrees(deps.Registry)}
		s.budget.free = f
		if s.ws != nil {
			s.ws.budget.free = f
		}
	}
	if cfg.MaxConns > 0 || cfg.MaxConnsPerIP > 0 {
		s.limits = newConnLimits(cfg.MaxConns, cfg.MaxConnsPerIP, m.refused)
	}
	s.bodyErrors()
	m.gauges(deps.Registry, s)
	s.srv = &fasthttp.Server{
		Handler:            s.handle,
		ErrorHandler:       s.handleReadError,
		Name:               "web3gate",
		Logger:             fasthttpLogger{deps.Logger},
		MaxRequestBodySize: s.maxBody,
		// The read buffer holds a request's head: its size is the head's limit.
		ReadBufferSize: s.maxHead,
		// Bodies are read as they arrive (see readBody).
		StreamRequestBody: true,
		// No timeouts for fasthttp: the connections keep them (see watchedConn).
		CloseOnShutdown: true,
		// A WebSocket's connection is the socket's to close (socket.finish).
		KeepHijackedConns:            true,
		NoDefaultDate:                false,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
	}
	return s, nil
}

// Serve serves the public API on ln until Shutdown. The connections keep their read, write
// and idle timeouts, and a watchdog enforces them (see watchedListener).
func (s *Server) Serve(ln net.Listener) error {
	to := timeouts{header: s.cfg.HeaderTimeout, read: s.cfg.ReadTimeout, write: s.cfg.WriteTimeout, idle: s.cfg.IdleTimeout}
	wl := newWatchedListener(ln, deadlineTick, to, s.limits)
	defer wl.Close()
	return s.srv.Serve(wl)
}

// Shutdown stops accepting connections and waits for in-flight requests until ctx ends.
// WebSockets are closed (1001 "server shutting down") once their messages in progress are
// answered; those still open when ctx ends have their connections closed.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ws == nil {
		return s.srv.ShutdownWithContext(ctx)
	}
	s.ws.shutdown()
	err := s.srv.ShutdownWithContext(ctx)
	if werr := s.ws.wait(ctx.Done()); err == nil {
		err = werr
	}
	return err
}

// fasthttpLogger sends fasthttp's own messages (connection errors it already answered) to
// the debug level.
type fasthttpLogger struct{ log *zap.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	if ce := l.log.Check(zapcore.DebugLevel, "fasthttp"); ce != nil {
		ce.Write(zap.String("detail", fmt.Sprintf(format, args...)))
	}
}

// Handler is the fasthttp handler of the public API, for in-process benchmarks and tests.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }
