// The server's set of open sockets: admitted per principal, per source address and per
// client id, drained and closed by Shutdown.

package proxy

import (
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/fasthttp/websocket"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// socketSet is the server's open sockets: counted per principal, per source address and per
// client id (in this process: each replica counts its own), closed by Shutdown.
type socketSet struct {
	cfg      WebSocketConfig
	upgrader websocket.Upgrader
	wbufs    wsBufferPool // websocket.Conn's, which the sockets' writers do not use (frames.go)
	fbufs    frameBufs    // the writers' frame buffers
	queues   queueArrays  // the sockets' long queue arrays
	writers  writers      // the sockets' writers' turns
	metrics  *metrics

	// budget bounds the bytes of the answers queued and not yet written, all sockets
	// together (maxQueuedBytesTotal); notifications, whose results the sockets share, are
	// bounded per socket only.
	budget bodyBudget
	// queuedBytes is the bytes of every socket's queue (answers and notifications);
	// peakQueued the most one socket's queue has held (for the tests).
	queuedBytes, peakQueued atomic.Int64

	mu           sync.Mutex
	open         map[*socket]struct{}
	perClient    map[string]int
	perPrincipal map[string]int
	perAddr      map[netip.Addr]int
	closing      bool
	// wg counts the sockets reserved and not yet ended, and their goroutines (message
	// servers, writers): Shutdown waits for them.
	wg sync.WaitGroup

	errCrowded, errPrincipalCrowded, errAddrCrowded, errTooManySubs *jsonrpc.Error
	// The answers to calls whose answers would exceed the socket's queue, or all sockets'.
	errQueueFull, errQueuesBusy *jsonrpc.Error
	closeTooLarge, closeIdle    string
}

// socketOwner is whom a socket is counted against: its client id, its principal (the access
// token's subject; empty without a token: not counted) and its source address (the TCP
// peer's, or the one a trusted proxy names in X-Forwarded-For; invalid: not counted).
// Client ids are public (they sit in dApp URLs), so the caps of a principal and of an
// address, below the client id's, keep one stranger from taking all of an app's sockets.
type socketOwner struct {
	client, principal string
	addr              netip.Addr
}

var errShuttingDown = func() *jsonrpc.Error {
	e := jsonrpc.ErrLimitExceeded.With("server shutting down; retry on another replica or later")
	e.HTTPStatus = http.StatusServiceUnavailable
	return e
}()

func newSocketSet(cfg WebSocketConfig, m *metrics) *socketSet {
	ss := &socketSet{
		cfg:          cfg,
		metrics:      m,
		open:         map[*socket]struct{}{},
		perClient:    map[string]int{},
		perPrincipal: map[string]int{},
		perAddr:      map[netip.Addr]int{},
		errCrowded: jsonrpc.ErrLimitExceeded.Withf("too many WebSockets: %d are open for this client id, the most server.websocket.maxConnsPerClient allows; close one or retry later",
			cfg.MaxConnsPerClient),
		errPrincipalCrowded: jsonrpc.ErrLimitExceeded.Withf("too many WebSockets: %d are open for this access token's principal, the most server.websocket.maxConnsPerPrincipal allows; close one or retry later",
			cfg.MaxConnsPerPrincipal),
		errAddrCrowded: jsonrpc.ErrLimitExceeded.Withf("too many WebSockets: %d are open from this address, the most server.websocket.maxConnsPerAddress allows; close one or retry later",
			cfg.MaxConnsPerAddress),
		errTooManySubs: jsonrpc.ErrLimitExceeded.Withf("too many subscriptions: %d are open on this connection, the most server.websocket.maxSubscriptionsPerConn allows; unsubscribe one or open another connection",
			cfg.MaxSubscriptionsPerConn),
		errQueueFull: jsonrpc.ErrLimitExceeded.Withf("answer not sent: this connection's unsent answers and notifications would exceed server.websocket.maxQueuedBytes (%d bytes); read what was sent before calling again, or make large calls over HTTP",
			cfg.MaxQueuedBytes),
		errQueuesBusy: jsonrpc.ErrLimitExceeded.Withf("server busy: the answers waiting to be written to all WebSockets would exceed server.websocket.maxQueuedBytesTotal (%d bytes); retry later",
			cfg.MaxQueuedBytesTotal),
		closeTooLarge: fmt.Sprintf("message exceeds server.websocket.maxMessageBytes (%d bytes)", cfg.MaxMessageBytes),
		closeIdle:     fmt.Sprintf("idle: no message for server.websocket.idleTimeout (%s) and no subscription", cfg.IdleTimeout),
	}
	ss.budget.limit = int64(cfg.MaxQueuedBytesTotal)
	ss.upgrader = websocket.Upgrader{
		HandshakeTimeout: cfg.WriteTimeout,
		ReadBufferSize:   wsReadBuffer,
		WriteBufferSize:  wsWriteBuffer,
		WriteBufferPool:  &ss.wbufs,
		Subprotocols:     []string{Subprotocol},
		CheckOrigin:      func(*http.Request) bool { return true }, // checked by serveUpgrade
		Error:            func(http.ResponseWriter, *http.Request, int, error) {},
	}
	return ss
}

// admit returns the error that refuses a new socket of o now (counted in the refused
// metric), or nil; with take, an admitted socket is counted in. The caps are checked from the
// narrowest: a principal's or an address's sockets over its own cap are refused before they
// count against the client id's. The upgrade checks without taking, so that a refusal is an
// HTTP answer; the handover takes, checking again, as another upgrade of the same owner may
// have come in between.
func (ss *socketSet) admit(o socketOwner, take bool) *jsonrpc.Error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.closing:
		return errShuttingDown
	case o.principal != "" && ss.perPrincipal[o.principal] >= ss.cfg.MaxConnsPerPrincipal:
		ss.metrics.wsRefusedPrincipal.Inc()
		return ss.errPrincipalCrowded
	case o.addr.IsValid() && ss.perAddr[o.addr] >= ss.cfg.MaxConnsPerAddress:
		ss.metrics.wsRefusedAddr.Inc()
		return ss.errAddrCrowded
	case ss.perClient[o.client] >= ss.cfg.MaxConnsPerClient:
		ss.metrics.wsRefused.Inc()
		return ss.errCrowded
	}
	if take {
		ss.perClient[o.client]++
		if o.principal != "" {
			ss.perPrincipal[o.principal]++
		}
		if o.addr.IsValid() {
			ss.perAddr[o.addr]++
		}
		ss.wg.Add(1)
	}
	return nil
}

// release counts out a socket of o reserved and ended.
func (ss *socketSet) release(o socketOwner) {
	ss.mu.Lock()
	countOut(ss.perClient, o.client)
	if o.principal != "" {
		countOut(ss.perPrincipal, o.principal)
	}
	if o.addr.IsValid() {
		countOut(ss.perAddr, o.addr)
	}
	ss.mu.Unlock()
	ss.wg.Done()
}

// countOut takes one from m[k], deleting the key at zero so that the maps hold only owners
// with open sockets.
func countOut[K comparable](m map[K]int, k K) {
	if n := m[k]; n <= 1 {
		delete(m, k)
	} else {
		m[k] = n - 1
	}
}

// attach adds a started socket; a socket that starts during Shutdown is closed at once.
func (ss *socketSet) attach(k *socket) {
	ss.mu.Lock()
	ss.open[k] = struct{}{}
	closing := ss.closing
	ss.mu.Unlock()
	if closing {
		k.drain()
	}
}

// detach removes an ended socket and counts it out.
func (ss *socketSet) detach(k *socket) {
	ss.mu.Lock()
	delete(ss.open, k)
	ss.mu.Unlock()
	ss.release(k.owner)
}

func (ss *socketSet) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.open)
}

// shutdown refuses new sockets and closes the open ones with 1001 once their messages in
// progress are answered.
func (ss *socketSet) shutdown() {
	ss.mu.Lock()
	ss.closing = true
	open := make([]*socket, 0, len(ss.open))
	for k := range ss.open {
		open = append(open, k)
	}
	ss.mu.Unlock()
	for _, k := range open {
		k.drain()
	}
}

// wait waits until every socket has ended, or until done is closed; then the connections of
// the sockets left are closed, and their ends awaited.
func (ss *socketSet) wait(done <-chan struct{}) error {
	ended := make(chan struct{})
	go func() { ss.wg.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-done:
	}
	ss.mu.Lock()
	left := make([]*socket, 0, len(ss.open))
	for k := range ss.open {
		left = append(left, k)
	}
	ss.mu.Unlock()
	for _, k := range left {
		_ = k.conn.NetConn().Close()
	}
	<-ended
	return fmt.Errorf("%d WebSockets closed before their close handshake ended", len(left))
}
