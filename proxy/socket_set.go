// The server's set of open sockets: admitted per client id, drained and closed by Shutdown.

package proxy

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/fasthttp/websocket"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// socketSet is the server's open sockets: counted per client id, closed by Shutdown.
type socketSet struct {
	cfg      WebSocketConfig
	upgrader websocket.Upgrader
	wbufs    wsBufferPool // websocket.Conn's, which the sockets' writers do not use (frames.go)
	fbufs    frameBufs    // the writers' frame buffers
	queues   queueArrays  // the sockets' long queue arrays
	writers  writers      // the sockets' writers' turns
	metrics  *metrics

	mu        sync.Mutex
	open      map[*socket]struct{}
	perClient map[string]int
	closing   bool
	// wg counts the sockets reserved and not yet ended, and their goroutines (message
	// servers, writers): Shutdown waits for them.
	wg sync.WaitGroup

	errCrowded, errTooManySubs *jsonrpc.Error
	closeTooLarge, closeIdle   string
}

var errShuttingDown = func() *jsonrpc.Error {
	e := jsonrpc.ErrLimitExceeded.With("server shutting down; retry on another replica or later")
	e.HTTPStatus = http.StatusServiceUnavailable
	return e
}()

func newSocketSet(cfg WebSocketConfig, m *metrics) *socketSet {
	ss := &socketSet{
		cfg:       cfg,
		metrics:   m,
		open:      map[*socket]struct{}{},
		perClient: map[string]int{},
		errCrowded: jsonrpc.ErrLimitExceeded.Withf("too many WebSockets: %d are open for this client id, the most server.websocket.maxConnsPerClient allows; close one or retry later",
			cfg.MaxConnsPerClient),
		errTooManySubs: jsonrpc.ErrLimitExceeded.Withf("too many subscriptions: %d are open on this connection, the most server.websocket.maxSubscriptionsPerConn allows; unsubscribe one or open another connection",
			cfg.MaxSubscriptionsPerConn),
		closeTooLarge: fmt.Sprintf("message exceeds server.websocket.maxMessageBytes (%d bytes)", cfg.MaxMessageBytes),
		closeIdle:     fmt.Sprintf("idle: no message for server.websocket.idleTimeout (%s) and no subscription", cfg.IdleTimeout),
	}
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

// admit returns the error that refuses a new socket of client now (counted in the refused
// metric), or nil; with take, an admitted socket is counted in. The upgrade checks without
// taking, so that a refusal is an HTTP answer; the handover takes, checking again, as another
// upgrade of the client may have come in between.
func (ss *socketSet) admit(client string, take bool) *jsonrpc.Error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.closing:
		return errShuttingDown
	case ss.perClient[client] >= ss.cfg.MaxConnsPerClient:
		ss.metrics.wsRefused.Inc()
		return ss.errCrowded
	}
	if take {
		ss.perClient[client]++
		ss.wg.Add(1)
	}
	return nil
}

// release counts out a socket of client reserved and ended.
func (ss *socketSet) release(client string) {
	ss.mu.Lock()
	if n := ss.perClient[client]; n <= 1 {
		delete(ss.perClient, client)
	} else {
		ss.perClient[client] = n - 1
	}
	ss.mu.Unlock()
	ss.wg.Done()
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
	ss.release(k.client)
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
