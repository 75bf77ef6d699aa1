package tracing

import (
	"context"
	"net/http"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context propagation (traceparent, tracestate): read from the requests the
// public listener serves (when tracing.trustIncoming), written into the requests the
// upstream pools send.

// Extract returns ctx carrying the remote span context of h's traceparent header; ctx
// itself when h has none or an invalid one.
func Extract(ctx context.Context, h *fasthttp.RequestHeader) context.Context {
	if len(h.Peek("traceparent")) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, requestHeader{h})
}

// Inject writes the traceparent (and tracestate) of the span context ctx carries into h;
// nothing when ctx carries none.
func Inject(ctx context.Context, h *fasthttp.RequestHeader) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, requestHeader{h})
}

// InjectHTTP is Inject for a net/http request's header.
func InjectHTTP(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// requestHeader is a fasthttp request header as a propagation carrier.
type requestHeader struct{ h *fasthttp.RequestHeader }

func (c requestHeader) Get(key string) string { return string(c.h.Peek(key)) }
func (c requestHeader) Set(key, value string) { c.h.Set(key, value) }
func (c requestHeader) Keys() []string {
	var keys []string
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}
