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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	}
	s.srv = &fasthttp.Server{
		Handler:                      s.handle,
		ErrorHandler:                 s.handleReadError,
		Name:                         "web3gate",
		Logger:                       fasthttpLogger{deps.Logger},
		MaxRequestBodySize:           cfg.MaxBodyBytes,
		ReadTimeout:                  cfg.ReadTimeout,
		WriteTimeout:                 cfg.WriteTimeout,
		IdleTimeout:                  cfg.IdleTimeout,
		CloseOnShutdown:              true,
		NoDefaultDate:                false,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
	}
	return s, nil
}

// Serve serves the public API on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Shutdown stops accepting connections and waits for in-flight requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.ShutdownWithContext(ctx)
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	reqID := s.requestID(ctx)
	ctx.Response.Header.SetCanonical(headerRequestID, s2b(reqID))
	route, params, allowed := s.router.match(b2s(ctx.Method()), b2s(ctx.Path()))
	if route == nil {
		if len(allowed) > 0 {
			for _, m := range allowed {
				ctx.Response.Header.Add("Allow", m)
			}
			writeRESTError(ctx, http.StatusMethodNotAllowed, reqID, fmt.Sprintf("method %s is not allowed here", ctx.Method()))
			return
		}
		writeRESTError(ctx, http.StatusNotFound, reqID, "no such route")
		return
	}
	if route.REST != nil {
		s.serveREST(ctx, route, params, reqID, start)
		return
	}
	s.serveRPC(ctx, route, params, reqID, start)
}

// serveRPC answers a JSON-RPC request, single or batch.
func (s *Server) serveRPC(ctx *fasthttp.RequestCtx, route *Route, params Params, reqID string, start time.Time) {
	chainID := route.ChainID
	if chainID == 0 {
		raw := params.Get("chain_id")
		id, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || id == 0 || !s.known(id) {
			s.writeRPCError(ctx, route, nil, jsonrpc.ErrUnknownChain.Withf("chain %q is not served here", truncate(raw, 32)), start)
			return
		}
		chainID = id
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 && !isJSON(ct) {
		s.writeRPCError(ctx, route, nil, jsonrpc.ErrUnsupportedMedia, start)
		return
	}
	// The body is copied once: calls may outlive fasthttp's buffer (coalesced upstream
	// requests, batch workers), and everything parsed from it aliases it.
	body := append([]byte(nil), ctx.PostBody()...)
	msg, perr := jsonrpc.Parse(body, s.cfg.MaxBatch)
	if perr != nil {
		var id []byte
		if !msg.Batch && len(msg.Requests) == 1 {
			id = msg.Requests[0].ID
		}
		s.writeRPCError(ctx, route, id, perr, start)
		return
	}
	ex := &Exchange{RequestID: reqID, Start: start, Batch: msg.Batch}
	ex.readHeaders(&ctx.Request.Header)

	if !msg.Batch {
		r := msg.Requests[0]
		ex.single = Call{Ctx: s.ctx, Exchange: ex, Route: route, ChainID: chainID, Request: r}
		resp, err := s.serveCall(&ex.single, start)
		if f := ex.Fatal(); f != nil {
			s.writeRPCError(ctx, route, r.ID, s.wireError(f, ex, r.Method), start)
			return
		}
		if r.Notification() {
			ctx.SetStatusCode(http.StatusNoContent)
			return
		}
		buf := s.getBuf()
		var e *jsonrpc.Error
		status := http.StatusOK
		if err != nil {
			e = s.wireError(err, ex, r.Method)
			status = e.Status()
		}
		*buf = jsonrpc.AppendResponse((*buf)[:0], r.ID, resultOf(resp), e)
		s.writeJSON(ctx, status, *buf)
		s.putBuf(buf)
		return
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
		s.writeRPCError(ctx, route, nil, s.wireError(f, ex, ""), start)
		return
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
		ctx.SetStatusCode(http.StatusNoContent)
	} else {
		s.writeJSON(ctx, http.StatusOK, b)
	}
	s.putBuf(buf)
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
	s.metrics.observe(route, "", e, time.Since(start))
	buf := s.getBuf()
	*buf = jsonrpc.AppendResponse((*buf)[:0], id, nil, e)
	s.writeJSON(ctx, e.Status(), *buf)
	s.putBuf(buf)
}

// handleReadError answers requests fasthttp could not read: an oversize body, a malformed
// request line or headers, a read timeout.
func (s *Server) handleReadError(ctx *fasthttp.RequestCtx, err error) {
	e := jsonrpc.ErrParse.With("malformed HTTP request")
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = jsonrpc.ErrBodyTooLarge.Withf("request body exceeds %d bytes", s.cfg.MaxBodyBytes)
	case isTimeout(err):
		e = jsonrpc.ErrInvalidRequest.With("request read timed out")
		e.HTTPStatus = http.StatusRequestTimeout
	}
	ctx.Response.Header.Set("X-Request-Id", s.newRequestID())
	ctx.SetConnectionClose()
	s.writeJSON(ctx, e.Status(), jsonrpc.AppendResponse(nil, nil, nil, e))
}

func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		s.bufs.Put(b)
	}
}

// requestID echoes a well-formed X-Request-Id from the client, or makes one.
func (s *Server) requestID(ctx *fasthttp.RequestCtx) string {
	if v := ctx.Request.Header.Peek("X-Request-Id"); validRequestID(v) {
		return string(v)
	}
	return s.newRequestID()
}

func (s *Server) newRequestID() string {
	var b [32]byte
	out := append(b[:0], s.idPrefix...)
	out = strconv.AppendUint(out, s.idSeq.Add(1), 36)
	return string(out)
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

// readHeaders copies the credentials and the Idempotency-Key of h into e.
func (e *Exchange) readHeaders(h *fasthttp.RequestHeader) {
	if v := h.Peek("X-API-Key"); len(v) > 0 {
		e.ClientID = string(v)
	}
	if v := h.Peek("Authorization"); len(v) > 0 {
		if tok, ok := bearerToken(v); ok {
			e.Bearer = tok
		} else {
			e.BadAuthHeader = true
		}
	}
	if v := h.Peek("Idempotency-Key"); len(v) > 0 {
		e.IdempotencyKey = string(v)
		e.HasIdempotencyKey = true
	}
}

func bearerToken(h []byte) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !bytes.EqualFold(h[:len(prefix)], []byte(prefix)) {
		return "", false
	}
	tok := bytes.TrimSpace(h[len(prefix):])
	if len(tok) == 0 {
		return "", false
	}
	return string(tok), true
}

func isJSON(ct []byte) bool {
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
