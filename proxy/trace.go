// Tracing (tracing.enabled): the server span of each request and WebSocket message, a span
// per call of a batch, the spans of the once-per-exchange stages (auth, ratelimit), and
// TraceStage for the others. Off, Server.tracer is nil and each hook is a nil check;
// docs/tracing.md lists the spans and their attributes.

package proxy

import (
	"context"
	"sync/atomic"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// reqTrace is the tracing of one request or WebSocket message: its server span, and the
// context that carries it, the parent of the spans made while it is served.
type reqTrace struct {
	tracer trace.Tracer
	ctx    context.Context
	span   trace.Span
}

// spanNames are the server spans' names of the routes, by route index: "POST
// /v1/web3/mainnet" for a request, "WS /v1/web3/mainnet" for a WebSocket message; and the
// options of a server span. Made once, at New: a request that is not sampled then costs
// its span and context only (docs/performance.md, "Tracing").
type spanNames struct {
	http, ws []string
	server   []trace.SpanStartOption
}

func newSpanNames(routes []*Route) spanNames {
	n := spanNames{http: make([]string, len(routes)), ws: make([]string, len(routes)),
		server: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}}
	for i, r := range routes {
		n.http[i] = r.Method + " " + r.Pattern
		n.ws[i] = "WS " + r.Pattern
	}
	return n
}

// startTrace starts the server span of a request on route: the child of the request's
// traceparent when it has a valid one and tracing.trustIncoming is on, else a new trace.
// It starts once the route is known, microseconds after the request's arrival.
func (s *Server) startTrace(ctx *fasthttp.RequestCtx, route *Route, reqID []byte) *reqTrace {
	parent := s.ctx
	if s.traceIncoming {
		parent = tracing.Extract(parent, &ctx.Request.Header)
	}
	tctx, span := s.tracer.Start(parent, s.spanNames.http[route.idx], s.spanNames.server...)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("http.request.method", route.Method),
			attribute.String("http.route", route.Pattern),
			attribute.String("web3gate.route", route.Name),
			attribute.String("web3gate.request_id", string(reqID)))
		if route.REST == nil {
			span.SetAttributes(attribute.String("rpc.system", "jsonrpc"))
		}
	}
	return &reqTrace{tracer: s.tracer, ctx: tctx, span: span}
}

// startMessageTrace starts the server span of a WebSocket message on route: a new trace
// (a message has no headers), naming the socket by its upgrade's request id.
func (s *Server) startMessageTrace(route *Route, reqID []byte, socket string) *reqTrace {
	tctx, span := s.tracer.Start(s.ctx, s.spanNames.ws[route.idx], s.spanNames.server...)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("web3gate.route", route.Name),
			attribute.String("http.route", route.Pattern),
			attribute.String("rpc.system", "jsonrpc"),
			attribute.String("web3gate.request_id", string(reqID)),
			attribute.String("web3gate.socket", socket))
	}
	return &reqTrace{tracer: s.tracer, ctx: tctx, span: span}
}

// endTrace ends the server span of the request rec recorded, answered with status (0: a
// WebSocket message). It is marked failed when the request got a server-side error (a
// status of 500 or more, its own or of one of its calls).
func endTrace(rec *reqRecord, status int) {
	span := rec.trace.span
	if !span.IsRecording() {
		span.End()
		return
	}
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if rec.client != "" {
		span.SetAttributes(attribute.String("web3gate.client", ClientFingerprint(rec.client)))
	}
	switch {
	case rec.batch:
		span.SetAttributes(attribute.Int("web3gate.rpc.batch_size", rec.calls), attribute.Int("web3gate.rpc.failed", rec.failed))
	case rec.calls == 1:
		span.SetAttributes(attribute.String("rpc.method", truncate(rec.methods[0], 64)))
	}
	if rec.failed > 0 && !rec.batch {
		span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", rec.codes[0]))
	}
	if max(status, rec.worst) >= 500 {
		span.SetStatus(codes.Error, truncate(rec.msg, 200))
	}
	span.End()
}

// traceContext is the context of a REST request: base, carrying the server span when the
// request is traced.
func (r *reqRecord) traceContext(base context.Context) context.Context {
	if r.trace == nil {
		return base
	}
	return r.trace.ctx
}

// startCall starts the span of one call of a traced batch, the child of the server span.
func (t *reqTrace) startCall(c *Call) trace.Span {
	ctx, span := tracing.Start(c.Ctx, t.tracer, jsonrpc.MethodLabel(c.Request.Method), trace.WithAttributes(
		attribute.String("rpc.system", "jsonrpc"),
		attribute.String("rpc.method", truncate(c.Request.Method, 64))))
	c.Ctx = ctx
	return span
}

// exchangeStage runs f, a stage's once-per-exchange work (auth, ratelimit), in a span named
// name, the child of the server span.
func (t *reqTrace) exchangeStage(name string, f func() error) error {
	_, span := tracing.Start(t.ctx, t.tracer, name)
	err := f()
	tracing.End(span, err)
	return err
}

// TraceStage wraps st so that a call applies selects is served in a span named name: the
// child of the call's span, the parent of what the stage and those after it do. done, when
// not nil, adds to the span once the stage returned; passed says whether st passed the call
// on (a cache stage that did not answered from the cache). A call that is not traced (not
// sampled) goes to st as it is.
func TraceStage(t trace.Tracer, name string, st Stage, applies func(c *Call) bool, done func(span trace.Span, passed bool)) Stage {
	return &tracedStage{tracer: t, name: name, stage: st, applies: applies, done: done}
}

type tracedStage struct {
	tracer  trace.Tracer
	name    string
	stage   Stage
	applies func(c *Call) bool
	done    func(span trace.Span, passed bool)
}

func (s *tracedStage) Serve(c *Call, next Handler) (*Response, error) {
	if !s.applies(c) {
		return s.stage.Serve(c, next)
	}
	ctx, span := tracing.Start(c.Ctx, s.tracer, s.name)
	if span == nil {
		return s.stage.Serve(c, next)
	}
	parent := c.Ctx
	c.Ctx = ctx
	pn := &passedOn{next: next}
	resp, err := s.stage.Serve(c, pn)
	c.Ctx = parent
	if s.done != nil {
		s.done(span, pn.passed.Load())
	}
	tracing.End(span, err)
	return resp, err
}

// passedOn is the next handler of a traced stage: it records whether the stage called it.
type passedOn struct {
	next   Handler
	passed atomic.Bool
}

func (p *passedOn) Serve(c *Call) (*Response, error) {
	p.passed.Store(true)
	return p.next.Serve(c)
}
