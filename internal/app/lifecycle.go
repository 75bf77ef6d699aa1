package app

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// A Component is one long-lived part of the server: the store, the upstream pools, a
// background worker, a listener. Components are started in the order of their list and
// stopped in reverse, so that each stops while everything it uses is still running.
type Component struct {
	Name string
	// Start builds the part and starts its work. When it fails, it leaves nothing running
	// of its own; the components started before it are stopped.
	Start func(ctx context.Context) error
	// Stop ends the part's work and releases what it holds; nil when there is nothing to
	// stop. It runs once, only after a Start that succeeded; ctx bounds a graceful drain.
	Stop func(ctx context.Context) error
}

// startAll starts cs in order. When one fails, the components already started are stopped
// in reverse order (with stopCtx's deadline) and the error is returned wrapped with the
// failing component's name. On success it returns the components to stop, in start order.
func startAll(ctx context.Context, log *zap.Logger, cs []Component, stopCtx func() (context.Context, context.CancelFunc)) ([]Component, error) {
	started := make([]Component, 0, len(cs))
	for _, c := range cs {
		if err := c.Start(ctx); err != nil {
			sctx, cancel := stopCtx()
			stopAll(sctx, log, started)
			cancel()
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		log.Debug("component started", zap.String("component", c.Name))
		started = append(started, c)
	}
	return started, nil
}

// stopAll stops cs in reverse order, each once; a component that fails to stop is logged
// and the others are still stopped. It returns the errors joined.
func stopAll(ctx context.Context, log *zap.Logger, cs []Component) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if c.Stop != nil {
			if err := c.Stop(ctx); err != nil {
				log.Warn("component did not stop cleanly", zap.String("component", c.Name), zap.Error(err))
				errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
			}
		}
		log.Debug("component stopped", zap.String("component", c.Name))
	}
	return errors.Join(errs...)
}

// worker runs a function of the shape Run(ctx) in its own goroutine until its component
// stops: the adapter of the parts that work in a loop (the nonce manager's confirmers, the
// webhook deliverer). Its context does not end with the start context: the worker stops
// when its component stops, after the listeners have drained.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *worker) start(ctx context.Context, run func(context.Context)) {
	ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		run(ctx)
	}()
}

func (w *worker) stop(context.Context) error {
	if w.cancel != nil {
		w.cancel()
		<-w.done
	}
	return nil
}
