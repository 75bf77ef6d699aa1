// Package tracing builds web3gate's OpenTelemetry tracer provider (tracing.enabled): spans
// exported over OTLP/HTTP in batches, sampled by a parent-based ratio, and the W3C Trace
// Context propagation that the proxy reads from requests and the upstream pools write into
// their requests. docs/tracing.md lists the spans and their attributes.
//
// Off, nothing of it is built: the packages that trace hold a nil trace.Tracer and check it
// before anything else, so the request path pays one nil check.
package tracing

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/web3gate/web3gate/internal/logx"
)

// Deps are what a Provider needs besides its config.
type Deps struct {
	Logger *zap.Logger
	// Version is the build's version: the resource's service.version.
	Version string
	// Replica is cluster.replicaId: the resource's service.instance.id.
	Replica string
	// Flood bounds the lines of failed exports; nil: a bound of its own.
	Flood *logx.Limiter
}

// Provider is the tracer provider of a server with tracing on.
type Provider struct {
	tp  *sdktrace.TracerProvider
	cfg Config
}

// New builds the provider of cfg (defaults applied, validated); it exports nothing until
// spans end. A collector that does not answer is no error: its exports fail and are logged.
func New(cfg Config, deps Deps) (*Provider, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	endpoint, _ := ExportURL(cfg.Endpoint)
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithTimeout(cfg.Timeout),
	}
	if len(cfg.Headers) > 0 {
		h := make(map[string]string, len(cfg.Headers))
		for k, v := range cfg.Headers {
			h[k] = string(v)
		}
		opts = append(opts, otlptracehttp.WithHeaders(h))
	}
	if cfg.Compression == "gzip" {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	} else {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.NoCompression))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.New(context.Background(),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES; the keys below win
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String("service.name", cfg.ServiceName),
			attribute.String("service.version", deps.Version),
			attribute.String("service.instance.id", deps.Replica),
		))
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	switch {
	case err != nil && res == nil:
		return nil, fmt.Errorf("resource: %w", err)
	case err != nil:
		// A malformed OTEL_RESOURCE_ATTRIBUTES: what could be read is kept.
		log.Warn("resource attributes partly ignored", zap.Error(err))
	}
	flood := deps.Flood
	if flood == nil {
		flood = logx.New(logx.Config{}, nil)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*cfg.SampleRatio))),
		sdktrace.WithBatcher(&loggedExporter{SpanExporter: exp, log: log, flood: flood},
			sdktrace.WithMaxQueueSize(cfg.QueueSize),
			sdktrace.WithMaxExportBatchSize(cfg.BatchSize),
			sdktrace.WithBatchTimeout(cfg.Interval),
			sdktrace.WithExportTimeout(cfg.Timeout)),
	)
	return &Provider{tp: tp, cfg: cfg}, nil
}

// Tracer is the tracer of the instrumentation scope pkg (a package's import path).
func (p *Provider) Tracer(pkg string) trace.Tracer { return p.tp.Tracer(pkg) }

// TrustIncoming is tracing.trustIncoming.
func (p *Provider) TrustIncoming() bool { return *p.cfg.TrustIncoming }

// Shutdown exports the spans still queued and stops the provider, within ctx and
// tracing.timeout.
func (p *Provider) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush spans: %w", err)
	}
	return nil
}

// loggedExporter logs a failed export (bounded by log.flood) instead of handing it to
// OpenTelemetry's global error handler, which writes outside the server's log format.
type loggedExporter struct {
	sdktrace.SpanExporter
	log   *zap.Logger
	flood *logx.Limiter
}

func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	if ce := e.flood.Check(e.log, zapcore.WarnLevel, "trace export failed; its spans are dropped", "tracing", "export"); ce != nil {
		// The error names the export URL (no credentials: see ExportURL) and the cause; the
		// headers are never in it.
		ce.Write(zap.Int("spans", len(spans)), zap.Error(err))
	}
	return nil
}

// Start starts a span named name as a child of the span ctx carries, only when that span is
// recording: the spans of a request that was not sampled, and of background work (head
// polls, confirmers), are not made. It returns ctx unchanged and a nil span then; End(nil,
// ...) does nothing.
func Start(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return t.Start(ctx, name, opts...)
}

// End ends span (nil: none), marking it failed with err when err is not nil. Only errors
// that say what they are (an ErrorCoder, such as a JSON-RPC error) give their message;
// any other is recorded as "internal error", since its text may hold anything.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		Fail(span, err)
	}
	span.End()
}

// ErrorCoder is an error with a JSON-RPC code: *jsonrpc.Error.
type ErrorCoder interface {
	error
	ErrorCode() int
}

// Fail records err on span: its JSON-RPC code and message when it has them (status Error),
// else "internal error".
func Fail(span trace.Span, err error) {
	var ec ErrorCoder
	if errors.As(err, &ec) {
		span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", ec.ErrorCode()))
		span.SetStatus(codes.Error, Truncate(ec.Error(), 200))
		return
	}
	span.SetStatus(codes.Error, "internal error")
}

// Truncate cuts s to n bytes, marking the cut.
func Truncate(s string, n int) string { return truncate(s, n) }
