package upstreams

// Tracing (tracing.enabled): a span for each call forwarded to a pool, and a client span
// for each HTTP attempt of it, whose traceparent goes with the attempt's request. Only the
// calls of a traced request have spans: the pool's own polls have none and send no
// traceparent. Off, Pool.tracer is nil and each hook is a nil check.

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// attemptOf numbers an attempt of a call: n from 1 (0: the pool's own check or poll),
// hedge for the second attempt of a hedged read.
type attemptOf struct {
	n     int
	hedge bool
}

// startForward starts the span of a call (or a batch of size calls, method "batch") sent to
// the pool: nil when ctx's span is not recording.
func (p *Pool) startForward(ctx context.Context, method string, size int) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, p.tracer, "upstream.forward")
	if span == nil {
		return ctx, nil
	}
	span.SetAttributes(
		attribute.String("web3gate.chain", p.name),
		attribute.Int64("web3gate.chain_id", int64(p.chainID)),
		attribute.String("rpc.system", "jsonrpc"),
		attribute.String("rpc.method", jsonrpc.MethodLabel(method)))
	if size > 0 {
		span.SetAttributes(attribute.Int("web3gate.rpc.batch_size", size))
	}
	return ctx, span
}

// startAttempt starts the client span of one attempt to n: nil when ctx's span is not
// recording. The node is named by its name and host, never its URL (which may hold a key).
func (p *Pool) startAttempt(ctx context.Context, n *node, label string, at attemptOf) (context.Context, trace.Span) {
	ctx, span := tracing.Start(ctx, p.tracer, "upstream.attempt", trace.WithSpanKind(trace.SpanKindClient))
	if span == nil {
		return ctx, nil
	}
	span.SetAttributes(
		attribute.String("web3gate.upstream.node", n.name),
		attribute.String("web3gate.chain", p.name),
		attribute.Int64("web3gate.chain_id", int64(p.chainID)),
		attribute.String("rpc.system", "jsonrpc"),
		attribute.String("rpc.method", label),
		attribute.String("http.request.method", "POST"),
		attribute.Int("web3gate.upstream.attempt", at.n),
		attribute.Bool("web3gate.upstream.hedge", at.hedge))
	if host, port := n.host(); host != "" {
		span.SetAttributes(attribute.String("server.address", host))
		if port > 0 {
			span.SetAttributes(attribute.Int("server.port", port))
		}
	}
	return ctx, span
}

// endAttempt ends an attempt's span with its HTTP status (0: none came) and outcome.
func endAttempt(span trace.Span, status int, o outcome, err error) {
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	span.SetAttributes(attribute.String("web3gate.upstream.outcome", o.String()))
	switch {
	case o == outcomeOK:
	case o == outcomeRPCError:
		tracing.Fail(span, err) // the node's JSON-RPC error: its code and message
	default:
		// Transport errors may quote the request URL: only the outcome is recorded.
		span.SetStatus(codes.Error, o.String())
	}
	span.End()
}

// host is the host and port of n's endpoint (scheme://host, or "embedded").
func (n *node) host() (string, int) {
	u, err := url.Parse(n.endpoint)
	if err != nil || u.Host == "" {
		return n.endpoint, 0
	}
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return u.Hostname(), port
}
