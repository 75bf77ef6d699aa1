package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/proxy"
)

// bound are the sockets of the two listeners, bound by the first component and served by
// the last two.
type bound struct {
	api, admin net.Listener
}

// bindListeners binds server.listen and admin.listen. It is the first component: an
// address in use (or not this host's) fails the start at once, naming its key and flag,
// before the store migrates or the dev chain starts. Until the listeners are served,
// connections wait in the kernel's backlog.
func (a *App) bindListeners(context.Context) error {
	api, err := net.Listen("tcp", a.cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen (--listen): %w", err)
	}
	admin, err := net.Listen("tcp", a.cfg.Admin.Listen)
	if err != nil {
		_ = api.Close()
		return fmt.Errorf("admin.listen (--admin-listen): %w", err)
	}
	a.bound = bound{api: api, admin: admin}
	return nil
}

// closeListeners closes the sockets; those served were closed by their server's shutdown
// already.
func (a *App) closeListeners(context.Context) error {
	for _, ln := range []net.Listener{a.bound.api, a.bound.admin} {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	return nil
}

// listener is one of the two listeners, served in its own goroutine from its start to its
// stop.
type listener struct {
	ln   net.Listener
	done chan struct{} // closed when its Serve has returned
}

// listen serves ln with serve. A Serve that returns before the listener's stop reports its
// error to Run, which then stops the server.
func (a *App) listen(ln net.Listener, serve func(net.Listener) error) *listener {
	l := &listener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case a.failed <- err:
			default:
			}
		}
	}()
	return l
}

// startAPI serves the public routes (routes.go) on server.listen.
func (a *App) startAPI(context.Context) (err error) {
	a.server, err = proxy.New(a.cfg.Server, proxy.Deps{
		Logger:   a.log.Named("proxy"),
		Registry: a.reg,
		Routes:   a.routes(),
		KnownChain: func(id uint64) bool {
			_, ok := a.ups.Pool(id)
			return ok
		},
		Verifier:   a.auth,
		RequestLog: a.cfg.Log.Requests,
		Flood:      a.flood,
		Tracer:     a.tracer("proxy"), TraceIncoming: a.traceIncoming(),
	})
	if err != nil {
		return err
	}
	a.api = a.listen(a.bound.api, a.server.Serve)
	return nil
}

// stopAPI drains the public listener: the calls in progress end (within ctx), the sockets
// are closed.
func (a *App) stopAPI(ctx context.Context) error {
	err := a.server.Shutdown(ctx)
	<-a.api.done
	if err != nil {
		return fmt.Errorf("drain incomplete: %w", err)
	}
	return nil
}

// startAdmin serves the admin routes (admin.go) on admin.listen. ReadTimeout bounds the
// bodies of the admin APIs as well as the headers.
func (a *App) startAdmin(context.Context) error {
	clients, err := auth.NewClientsAdmin(auth.ClientsAdminConfig{Tokens: a.adminAuth.list}, auth.ClientsAdminDeps{Clients: a.db, Logger: a.log.Named("oauth")})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.adminMux(clients), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	a.admin = a.listen(a.bound.admin, srv.Serve)
	a.adminServer = srv
	return nil
}

func (a *App) stopAdmin(ctx context.Context) error {
	err := a.adminServer.Shutdown(ctx)
	<-a.admin.done
	return err
}
