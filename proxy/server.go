package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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
}

// Server is the public fasthttp listener.
type Server struct {
	cfg     Config
	log     *zap.Logger
	router  *router
	known   func(uint64) bool
	metrics *metrics
	srv     *fasthttp.Server

	// ctx is the context of every call. It is never canceled: fasthttp gives no signal when
	// a client goes away, upstream attempts carry their own deadlines, and a context that
	// cannot be canceled lets the pool make its requests inline, without a goroutine each.
	ctx context.Context

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

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := ctx.Time() // fasthttp reads the clock for each request already
	if start.IsZero() {
		start = time.Now() // a RequestCtx that no fasthttp server handed over
	}
	var hdr reqHeaders
	hdr.read(&ctx.Request.Header)
	var idBuf [48]byte
	reqID := hdr.requestID
	if !validRequestID(reqID) {
		reqID = s.appendRequestID(idBuf[:0])
	}
	ctx.Response.Header.SetCanonical(headerRequestID, reqID)
	path := b2s(routePath(ctx))
	route, params, allowed := s.router.match(b2s(ctx.Method()), path)
	upgrade := false
	if route == nil && len(allowed) > 0 && s.ws != nil && ctx.IsGet() && websocket.FastHTTPIsWebSocketUpgrade(ctx) {
		route, params, upgrade = s.router.matchRPC(path)
	}
	corsOK := s.cors.allows(hdr.origin)
	if corsOK {
		s.cors.answer(&ctx.Response.Header, hdr.origin)
	}
	switch {
	case upgrade:
		s.serveUpgrade(ctx, route, params, reqID, &hdr, start)
	case route == nil && len(allowed) > 0 && corsOK && ctx.IsOptions():
		s.cors.preflight(ctx, hdr.origin, allowed)
	case route == nil && len(allowed) > 0:
		for _, m := range allowed {
			ctx.Response.Header.Add("Allow", m)
		}
		writeRESTError(ctx, http.StatusMethodNotAllowed, string(reqID), fmt.Sprintf("method %s is not allowed here", truncate(string(ctx.Method()), 32)))
	case route == nil:
		writeRESTError(ctx, http.StatusNotFound, string(reqID), "no such route")
	case route.REST != nil:
		s.serveREST(ctx, route, params, string(reqID), start)
	default:
		s.serveRPC(ctx, route, params, reqID, &hdr, start)
	}
	if ctx.Request.IsBodyStream() && !s.bodyPreRead(ctx.Request.Header.ContentLength()) {
		// Some of the body is still on the connection (unread, or the read failed): the
		// connection cannot carry another request.
		ctx.SetConnectionClose()
	}
}

// routePath is the path routes are matched against: the request URI as sent when it is a
// plain path that fasthttp's decoding and normalization would leave as it is, else
// fasthttp's decoded path (which parses the whole URI).
func routePath(ctx *fasthttp.RequestCtx) []byte {
	uri := ctx.Request.Header.RequestURI()
	if !plainPath(uri) {
		return ctx.Path()
	}
	return uri
}

// plainPath reports whether p is "/" followed by segments of [A-Za-z0-9_.~-], none empty,
// "." or "..": no query, escape, double slash or dot segment to decode or normalize.
func plainPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	seg := 0 // length of the current segment
	dots := 0
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if (seg == 0 && i < len(p)) || (seg > 0 && seg == dots && dots <= 2) {
				return false
			}
			seg, dots = 0, 0
			continue
		}
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '~':
		case c == '.':
			dots++
		default:
			return false
		}
		seg++
	}
	return true
}

// serveRPC answers a JSON-RPC request, single or batch.
func (s *Server) serveRPC(ctx *fasthttp.RequestCtx, route *Route, params Params, reqID []byte, hdr *reqHeaders, start time.Time) {
	chainID, cerr := s.routeChain(route, params)
	if cerr != nil {
		s.writeRPCError(ctx, route, nil, cerr, start)
		return
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 && !isJSON(ct) {
		s.writeRPCError(ctx, route, nil, jsonrpc.ErrUnsupportedMedia, start)
		return
	}
	hdr.readURL(ctx, params)
	raw, owned, held, berr := s.readBody(ctx)
	if berr != nil {
		s.retryAfter(ctx, berr)
		s.writeRPCError(ctx, route, nil, berr, start)
		return
	}
	if held > 0 {
		defer s.budget.give(held)
	}
	ex, body := newExchange(raw, owned, reqID, hdr, start)
	perr := jsonrpc.ParseInto(&ex.msg, body, s.cfg.MaxBatch)
	status, buf := s.answer(ex, route, chainID, perr, start)
	writeLimit(&ctx.Response.Header, &ex.Limit)
	if buf == nil {
		ctx.SetStatusCode(status)
		return
	}
	s.writeBuf(ctx, status, buf)
}

// answer serves the message parsed into ex (perr: the error that answers it whole, from
// jsonrpc.ParseInto) and returns the HTTP status and the JSON answer, in a buffer of getBuf;
// the buffer is nil when nothing is answered (notifications only: 204). The same serves a
// POST body and a WebSocket message.
func (s *Server) answer(ex *Exchange, route *Route, chainID uint64, perr *jsonrpc.Error, start time.Time) (int, *[]byte) {
	msg := &ex.msg
	if perr != nil {
		var id []byte
		if !msg.Batch && len(msg.Requests) == 1 {
			id = msg.Requests[0].ID
		}
		return s.errorAnswer(route, id, perr, start)
	}
	ex.Batch = msg.Batch

	if !msg.Batch {
		r := msg.Requests[0]
		ex.single = Call{Ctx: s.ctx, Exchange: ex, Route: route, ChainID: chainID, Request: r}
		resp, err := s.serveCall(&ex.single, start)
		if f := ex.Fatal(); f != nil {
			return s.errorAnswer(route, r.ID, s.wireError(f, ex, r.Method), start)
		}
		if r.Notification() {
			return http.StatusNoContent, nil
		}
		buf := s.getBuf()
		var e *jsonrpc.Error
		status := http.StatusOK
		if err != nil {
			e = s.wireError(err, ex, r.Method)
			status = e.Status()
		}
		*buf = jsonrpc.AppendResponse((*buf)[:0], r.ID, resultOf(resp), e)
		return status, buf
	}

	type outcome struct {
		resp *Response
		err  error
	}
	out := make([]outcome, len(msg.Requests))
	s.forEach(len(msg.Requests), func(i int) {
		r := msg.Requests[i]
		if r.Invalid != nil {
			out[i].err = r.Invalid
			return
		}
		c := &Call{Ctx: s.ctx, Exchange: ex, Route: route, ChainID: chainID, Request: r}
		out[i].resp, out[i].err = s.serveCall(c, time.Now())
	})
	if f := ex.Fatal(); f != nil {
		return s.errorAnswer(route, nil, s.wireError(f, ex, ""), start)
	}
	buf := s.getBuf()
	b := append((*buf)[:0], '[')
	n := 0
	for i, r := range msg.Requests {
		if r.Notification() {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		var e *jsonrpc.Error
		if out[i].err != nil {
			e = s.wireError(out[i].err, ex, r.Method)
		}
		b = jsonrpc.AppendResponse(b, r.ID, resultOf(out[i].resp), e)
	}
	b = append(b, ']')
	*buf = b
	if n == 0 {
		s.putBuf(buf)
		return http.StatusNoContent, nil
	}
	if r := ex.Refused(); r != nil {
		// Refused whole by a rate limit (Exchange.Charge): every call has its error, and the
		// HTTP status says so too.
		return s.wireError(r, ex, "").Status(), buf
	}
	return http.StatusOK, buf
}

// routeChain is the chain a request on route is for: the route's own (mainnet), or the
// {chain_id} of its path when that chain is served here (else 4901 unknown chain).
func (s *Server) routeChain(route *Route, params Params) (uint64, *jsonrpc.Error) {
	if route.ChainID != 0 {
		return route.ChainID, nil
	}
	raw := params.Get("chain_id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 || !s.known(id) {
		return 0, jsonrpc.ErrUnknownChain.Withf("chain %q is not served here", truncate(raw, 32))
	}
	return id, nil
}

// serveCall runs one call through its route's compiled chain and records its metrics,
// timed from t.
func (s *Server) serveCall(c *Call, t time.Time) (*Response, error) {
	resp, err := c.Route.Handler.Serve(c)
	took := time.Since(t)
	s.metrics.observe(c.Route, c.Request.Method, err, took)
	if ce := s.log.Check(zapcore.DebugLevel, "call"); ce != nil {
		fields := []zap.Field{zap.String("req_id", c.Exchange.RequestID), zap.String("method", jsonrpc.MethodLabel(c.Request.Method)), zap.Uint64("chain", c.ChainID), zap.Duration("took", took)}
		if err != nil {
			fields = append(fields, zap.String("error", err.Error()))
		}
		ce.Write(fields...)
	}
	return resp, err
}

// forEach runs f(0..n-1) with at most BatchConcurrency at once, and returns when all are done.
func (s *Server) forEach(n int, f func(i int)) {
	workers := min(s.cfg.BatchConcurrency, n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// wireError maps any error to the JSON-RPC error sent to the client. An error that is not a
// *jsonrpc.Error is internal: its cause is logged here, and the client sees -32603 only.
func (s *Server) wireError(err error, ex *Exchange, method string) *jsonrpc.Error {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e
	}
	s.log.Error("internal error", zap.String("req_id", ex.RequestID), zap.String("method", jsonrpc.MethodLabel(method)), zap.Error(err))
	return jsonrpc.ErrInternal
}

// writeRPCError answers the whole HTTP request with one JSON-RPC error object.
func (s *Server) writeRPCError(ctx *fasthttp.RequestCtx, route *Route, id []byte, e *jsonrpc.Error, start time.Time) {
	status, buf := s.errorAnswer(route, id, e, start)
	s.writeBuf(ctx, status, buf)
}

// errorAnswer records a request of route answered whole with e and returns the HTTP status
// and the answer, in a buffer of getBuf.
func (s *Server) errorAnswer(route *Route, id []byte, e *jsonrpc.Error, start time.Time) (int, *[]byte) {
	s.metrics.observe(route, "", e, time.Since(start))
	buf := s.getBuf()
	*buf = jsonrpc.AppendResponse((*buf)[:0], id, nil, e)
	return e.Status(), buf
}

// handleReadError answers requests fasthttp could not read: a head over maxHeaderBytes (414
// when the request line alone does not fit, else 431), a malformed request line or headers,
// a read timeout. The answer has the REST error object when the request's path (as far as
// its connection kept it, see watchedConn.sample; of a pipelined request, the first one's)
// is not a JSON-RPC route's, else the JSON-RPC error shape.
func (s *Server) handleReadError(ctx *fasthttp.RequestCtx, err error) {
	var (
		line     []byte
		lineDone bool
	)
	if wc, ok := ctx.Conn().(*watchedConn); ok {
		line, lineDone = wc.requestLine()
	}
	e := errMalformedRequest
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &small) && !lineDone:
		e = jsonrpc.ErrInvalidRequest.Withf("request URI too long: the request line and header fields are limited to %d bytes", s.maxHead)
		e.HTTPStatus = http.StatusRequestURITooLong
	case errors.As(err, &small):
		e = jsonrpc.ErrInvalidRequest.Withf("request header fields too large: the request line and header fields are limited to %d bytes", s.maxHead)
		e.HTTPStatus = http.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = s.errBodyTooLarge
	case isTimeout(err):
		e = errReadTimeout
	}
	reqID := s.appendRequestID(nil)
	ctx.Response.Header.SetCanonical(headerRequestID, reqID)
	ctx.SetConnectionClose()
	if s.restLine(line) {
		writeRESTError(ctx, e.Status(), string(reqID), e.Message)
		return
	}
	s.writeJSON(ctx, e.Status(), jsonrpc.AppendResponse(nil, nil, nil, e))
}

// restLine reports whether a request whose line starts with line (up to headSample bytes)
// is for a path that no JSON-RPC route serves. A line without a path is not.
func (s *Server) restLine(line []byte) bool {
	_, target, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return false
	}
	if i := bytes.Index(target, []byte("://")); i > 0 && bytes.IndexByte(target[:i], '/') < 0 {
		// absolute form: scheme://authority/path
		target = target[i+3:]
		j := bytes.IndexByte(target, '/')
		if j < 0 {
			return false
		}
		target = target[j:]
	}
	if len(target) == 0 || target[0] != '/' {
		return false
	}
	end := bytes.IndexAny(target, "?# ")
	if end < 0 {
		return !s.router.rpcPath(string(target), false)
	}
	return !s.router.rpcPath(string(target[:end]), true)
}

func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// writeBuf answers with the JSON in buf, a buffer of getBuf, and gives buf up: a small one
// back to the pool once its bytes are copied into the response, a large one to the response
// itself (no copy; fasthttp's pooled response buffer does not grow to its size).
func (s *Server) writeBuf(ctx *fasthttp.RequestCtx, status int, buf *[]byte) {
	if cap(*buf) > maxPooledBuf {
		ctx.SetStatusCode(status)
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(*buf)
		return
	}
	s.writeJSON(ctx, status, *buf)
	s.bufs.Put(buf)
}

// maxPooledBuf is the largest buffer kept in the pool: a large answer's buffer is left to
// the garbage collector, so that the pool never holds the memory of rare large answers.
const maxPooledBuf = 64 << 10

func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		s.bufs.Put(b)
	}
}

// appendRequestID appends a new request id to dst: the process's random prefix and a
// sequence number.
func (s *Server) appendRequestID(dst []byte) []byte {
	dst = append(dst, s.idPrefix...)
	return strconv.AppendUint(dst, s.idSeq.Add(1), 36)
}

func validRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

func isJSON(ct []byte) bool {
	if string(ct) == "application/json" { // as nearly every client sends it
		return true
	}
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json"))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func resultOf(r *Response) []byte {
	if r == nil {
		return nil
	}
	return r.Result
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
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

var headerRequestID = []byte("X-Request-Id")
