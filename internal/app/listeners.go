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

// listener is one of the two listeners, served in its own goroutine from its start to its
// stop.
type listener struct {
	ln   net.Listener
	done chan struct{} // closed when its Serve has returned
}

// listen binds addr and serves it with serve. A Serve that returns before the listener's
// stop reports its error to Run, which then stops the server.
func (a *App) listen(addr string, serve func(net.Listener) error) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
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
	return l, nil
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
		Verifier: a.auth,
	})
	if err != nil {
		return err
	}
	a.api, err = a.listen(a.cfg.Server.Listen, a.server.Serve)
	return err
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
	clients, err := auth.NewClientsAdmin(a.cfg.Auth.OAuth.Admin, auth.ClientsAdminDeps{Clients: a.db, Logger: a.log.Named("oauth")})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.adminMux(clients), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	a.admin, err = a.listen(a.cfg.Admin.Listen, srv.Serve)
	if err != nil {
		return err
	}
	a.adminServer = srv
	return nil
}

func (a *App) stopAdmin(ctx context.Context) error {
	err := a.adminServer.Shutdown(ctx)
	<-a.admin.done
	return err
}
