package app

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// startTracing builds the tracer provider (tracing.enabled); off, a.tracing stays nil and
// every package gets a nil tracer. It starts first and stops last, so that the spans of
// everything else's stop are flushed.
func (a *App) startTracing(context.Context) (err error) {
	if !a.cfg.Tracing.Enabled {
		return nil
	}
	a.tracing, err = tracing.New(a.cfg.Tracing, tracing.Deps{Logger: a.log.Named("tracing"), Version: a.opts.Version,
		Replica: a.cfg.Cluster.ReplicaID, Flood: a.flood})
	return err
}

// stopTracing exports the spans still queued (within tracing.timeout) and stops the
// provider.
func (a *App) stopTracing(ctx context.Context) error {
	if a.tracing == nil {
		return nil
	}
	return a.tracing.Shutdown(ctx)
}

// tracer is the tracer of the package pkg (its path within the module); nil when tracing
// is off.
func (a *App) tracer(pkg string) trace.Tracer {
	if a.tracing == nil {
		return nil
	}
	return a.tracing.Tracer("github.com/web3gate/web3gate/" + pkg)
}

// traceIncoming is tracing.trustIncoming, with tracing on.
func (a *App) traceIncoming() bool { return a.tracing != nil && a.tracing.TrustIncoming() }

// traceStages wraps the stages that do work of their own in a span, for the calls they
// work on: filters (the filter methods), cache (the reads it caches or coalesces; its span
// says whether the answer came without the upstream) and sign (the signing methods). auth
// and ratelimit run once per exchange and have their spans from proxy. Off, the stages are
// returned as they are.
func (a *App) traceStages(stages []proxy.Stage) []proxy.Stage {
	t := a.tracer("middleware")
	if t == nil {
		return stages
	}
	out := make([]proxy.Stage, len(stages))
	for i, st := range stages {
		switch st {
		case proxy.Stage(a.filters):
			st = proxy.TraceStage(t, "filters", st, func(c *proxy.Call) bool { return filterMethods[c.Method()] }, nil)
		case proxy.Stage(a.cache):
			if a.cfg.Cache.Enabled || a.cfg.Cache.Coalesce {
				st = proxy.TraceStage(t, "cache", st, func(c *proxy.Call) bool { return jsonrpc.PureRead(c.Method()) }, cacheOutcome)
			}
		case proxy.Stage(a.signer):
			st = proxy.TraceStage(t, "sign", st, func(c *proxy.Call) bool { return jsonrpc.IsSigningMethod(c.Method()) }, nil)
		}
		out[i] = st
	}
	return out
}

// filterMethods are the methods the filters stage serves.
var filterMethods = map[string]bool{
	"eth_newFilter": true, "eth_newBlockFilter": true, "eth_newPendingTransactionFilter": true,
	"eth_getFilterChanges": true, "eth_getFilterLogs": true, "eth_uninstallFilter": true,
}

// cacheOutcome records whether the cache stage answered the call itself: from its local
// level, Redis, or an identical call in flight (a hit), or passed it on to the upstream (a
// miss, or a read it does not cache).
func cacheOutcome(span trace.Span, passed bool) {
	span.SetAttributes(attribute.Bool("web3gate.cache.hit", !passed))
}
