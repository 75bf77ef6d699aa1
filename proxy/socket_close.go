// Closing a socket: why the server closes one, the close handshake, and the socket's end.

package proxy

import (
	"time"

	"github.com/fasthttp/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// closeGrace is how long the client has to answer the server's close frame before the
// connection is closed.
const closeGrace = 2 * time.Second

// Why the server closes a socket: the label values of web3gate_websocket_dropped_total.
const (
	dropNone = iota
	dropSlowConsumer
	dropTokenExpired
	dropTooLarge
	dropBinary
	dropIdle
	dropPingTimeout
	dropMessageTimeout
	dropReasons
)

var dropLabels = [dropReasons]string{"", "slow_consumer", "token_expired", "message_too_large", "binary_message", "idle", "ping_timeout", "message_timeout"}

// The close reasons (at most 123 bytes each).
const (
	closeSlowConsumer = "slow consumer: outbound queue full (server.websocket.queueSize)"
	closeSlowBytes    = "slow consumer: outbound queue full (server.websocket.maxQueuedBytes)"
	closeShutdown     = "server shutting down"
	closeTokenExpired = "access token expired"
	closeBinary       = "binary messages are not supported: send JSON-RPC as text messages"
	closePingTimeout  = "no answer to pings (server.websocket.pingInterval)"
)

// closeWith closes the socket with code and reason (why: the dropped label, dropNone for
// none): its subscriptions end, what is queued is written, then the close frame.
func (k *socket) closeWith(code int, reason string, why int) {
	k.mu.Lock()
	subs, ok := k.closeLocked(code, reason, false)
	k.mu.Unlock()
	if ok {
		k.closed(code, reason, why)
	}
	k.endSubs(subs)
}

// closeLocked starts the close of an open socket, with k.mu held: its subscriptions are
// taken (the caller ends them once k.mu is released), the queue dropped when drop is set,
// and the close frame queued. ok is false when the socket was closing already.
func (k *socket) closeLocked(code int, reason string, drop bool) (subs []*subscription, ok bool) {
	if k.state != sockOpen {
		return nil, false
	}
	k.state = sockClosing
	subs = k.takeSubsLocked()
	if drop {
		k.dropQueueLocked()
	}
	k.closeFrame = websocket.FormatCloseMessage(code, reason)
	k.startWriterLocked()
	return subs, true
}

// closed records the close of the socket by the server.
func (k *socket) closed(code int, reason string, why int) {
	if why != dropNone {
		k.srv.metrics.wsDropped[why].Inc()
	}
	if ce := k.srv.log.Check(zapcore.DebugLevel, "websocket closed by the server"); ce != nil {
		ce.Write(zap.String("req_id", k.reqID), zap.Int("code", code), zap.String("reason", reason))
	}
}

// sendClose writes the close frame and gives the client closeGrace to answer it.
func (k *socket) sendClose(frame []byte) {
	if err := k.conn.WriteControl(websocket.CloseMessage, frame, time.Now().Add(k.ss.cfg.WriteTimeout)); err != nil {
		_ = k.conn.NetConn().Close()
		return
	}
	k.dl.Lock()
	k.graceUntil = time.Now().Add(closeGrace)
	_ = k.conn.SetReadDeadline(k.graceUntil)
	k.dl.Unlock()
}

// finish ends the socket once its reader has ended: its subscriptions, its queue, its
// timer, its connection and its count.
func (k *socket) finish() {
	k.mu.Lock()
	subs := k.takeSubsLocked()
	k.state = sockClosed
	k.dropQueueLocked()
	k.mu.Unlock()
	k.timer.Stop()
	k.endSubs(subs)
	_ = k.conn.NetConn().Close()
	k.ss.detach(k)
}

// drain closes the socket for Shutdown: no new message is served, and the close (1001)
// follows the answers of those in progress.
func (k *socket) drain() {
	k.mu.Lock()
	k.draining = true
	var (
		subs []*subscription
		ok   bool
	)
	if k.inflight.Load() == 0 {
		subs, ok = k.closeLocked(websocket.CloseGoingAway, closeShutdown, false)
	}
	k.mu.Unlock()
	if ok {
		k.closed(websocket.CloseGoingAway, closeShutdown, dropNone)
	}
	k.endSubs(subs)
}
