// A socket (one WebSocket of a JSON-RPC route) and its reader, which serves the client's messages.

package proxy

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// socket is one WebSocket of a JSON-RPC route: its reader (run), its queue of outbound
// messages and the writer that drains it while it is not empty, its subscriptions, and its
// timer (pings, the idle timeout, the access token's expiry).
//
// Closing: the server closes a socket by queueing a close frame after what is queued (or in
// place of it, for a slow consumer), then gives the client closeGrace to answer it; the
// reader's end (the client's close frame, an error, the grace's deadline) ends the socket:
// its subscriptions, its connection, its count.
type socket struct {
	srv      *Server
	ss       *socketSet
	conn     *websocket.Conn // nil in the fuzz target: nothing is written
	bc       *batchConn      // conn's connection; nil with conn
	route    *Route
	chainID  uint64
	reqID    string     // the upgrade's request id, for the logs
	hdr      reqHeaders // the upgrade's credentials, for each message's exchange
	client   string
	expires  time.Time // the access token's expiry; zero: none
	maxAsync int32     // messages served at once on goroutines of their own (server.batchConcurrency)

	timer *time.Timer

	lastRead atomic.Int64 // unix nanoseconds of the last frame from the client, of any kind
	lastMsg  atomic.Int64 // unix nanoseconds of the last message from the client
	inflight atomic.Int32 // messages being served
	dropping atomic.Bool  // the queue was dropped: the writer abandons what it took of it

	mu         sync.Mutex
	state      uint8
	draining   bool     // Shutdown: no new message is served, and the close follows the last
	queue      []outMsg // written in order by the writer
	spare      []outMsg // the writer's other array, kept between bursts when small
	queued     int      // len(queue) and the notifications held by pending subscriptions
	writing    bool     // a writer goroutine runs
	closeFrame []byte   // the close frame, written after the queue once state is closing
	closeSent  bool
	subs       map[string]*subscription
	pending    []*subscription // subscriptions whose call's answer is not yet queued
	lastPing   time.Time
}

// The states of a socket.
const (
	sockOpen    uint8 = iota
	sockClosing       // the close frame is queued; nothing is queued after it
	sockClosed        // the reader ended
)

func newSocket(s *Server, conn *websocket.Conn, bc *batchConn, up *upgrade) *socket {
	k := &socket{
		srv:      s,
		ss:       s.ws,
		conn:     conn,
		bc:       bc,
		route:    up.route,
		chainID:  up.chainID,
		reqID:    up.reqID,
		hdr:      up.hdr,
		client:   up.client,
		expires:  up.expires,
		maxAsync: int32(s.cfg.BatchConcurrency),
	}
	now := time.Now()
	k.lastRead.Store(now.UnixNano())
	k.lastMsg.Store(now.UnixNano())
	k.lastPing = now
	if conn != nil {
		conn.SetPingHandler(k.onPing)
		conn.SetPongHandler(k.onPong)
		k.timer = time.AfterFunc(k.nextTick(now, true), k.tick)
	}
	return k
}

// run reads the client's messages until the connection ends, then ends the socket.
func (k *socket) run() {
	defer k.finish()
	for {
		typ, r, err := k.conn.NextReader()
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		k.lastRead.Store(now)
		k.lastMsg.Store(now)
		if !k.message(typ, r) {
			return
		}
	}
}

// message handles one message of the client (typ, and r its content): a text message is
// served, anything else closes the socket. It reports false when the connection broke.
func (k *socket) message(typ int, r io.Reader) bool {
	k.mu.Lock()
	stopped := k.state != sockOpen || k.draining
	k.mu.Unlock()
	if stopped {
		return true // read on (NextReader skips the rest) until the close handshake ends
	}
	if typ != websocket.TextMessage {
		k.closeWith(websocket.CloseUnsupportedData, closeBinary, dropBinary)
		return true
	}
	buf, body, held, err := k.readMessage(r)
	switch {
	case errors.Is(err, errMessageTooLarge):
		k.closeWith(websocket.CloseMessageTooBig, k.ss.closeTooLarge, dropTooLarge)
		return true
	case errors.Is(err, errBusy):
		k.srv.metrics.refusedBudget.Inc()
		_, out := k.srv.errorAnswer(k.route, nil, k.srv.errBodiesInFlight, time.Now())
		k.queueAnswer(nil, out)
		return true
	case err != nil:
		return false
	}
	if k.inflight.Add(1) <= k.maxAsync {
		k.ss.wg.Add(1)
		go func() {
			defer k.ss.wg.Done()
			k.serveMessage(buf, body, held)
		}()
		return true
	}
	k.serveMessage(buf, body, held) // the reader serves it, and reads nothing meanwhile
	return true
}

var (
	errMessageTooLarge = errors.New("message too large")
	errBusy            = errors.New("message bodies in flight over the budget")
)

// readMessage reads a text message whole, at most server.websocket.maxMessageBytes, into a
// buffer of getBuf (buf; nil when the message outgrew the pool: body is then its own). As
// for a POST body, what a message holds beyond streamedBodyOver bytes is taken from the body
// budget (held: to give back once answered).
func (k *socket) readMessage(r io.Reader) (buf *[]byte, body []byte, held int, err error) {
	limit := k.ss.cfg.MaxMessageBytes
	buf = k.srv.getBuf()
	b := (*buf)[:0]
	fail := func(err error) (*[]byte, []byte, int, error) {
		k.srv.budget.give(held)
		k.srv.putBuf(buf)
		return nil, nil, 0, err
	}
	for {
		if len(b) == cap(b) {
			size := min(max(2*cap(b), 1024), limit+1)
			if over := size - max(cap(b), streamedBodyOver); size > streamedBodyOver && over > 0 {
				if !k.srv.budget.take(over) {
					return fail(errBusy)
				}
				held += over
			}
			grown := make([]byte, len(b), size)
			copy(grown, b)
			b = grown
		}
		n, rerr := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return fail(errMessageTooLarge)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	if cap(b) <= maxPooledBuf {
		*buf = b
		return buf, b, held, nil
	}
	k.srv.putBuf(buf)
	return nil, b, held, nil
}

// serveMessage serves one text message (body, in buf when not nil) through the route's
// compiled chain and queues its answer.
func (k *socket) serveMessage(buf *[]byte, body []byte, held int) {
	defer k.messageDone()
	start := time.Now()
	var idBuf [48]byte
	reqID := k.srv.appendRequestID(idBuf[:0])
	ex, own := newExchange(body, buf == nil, reqID, &k.hdr, start)
	if buf != nil {
		k.srv.putBuf(buf) // newExchange copied the body
	}
	ex.Socket = k
	perr := jsonrpc.ParseInto(&ex.msg, own, k.srv.cfg.MaxBatch)
	_, out := k.srv.answer(ex, k.route, k.chainID, perr, start)
	k.srv.budget.give(held)
	k.queueAnswer(ex, out)
}

// messageDone counts a served message out; the last one of a draining socket closes it.
func (k *socket) messageDone() {
	if k.inflight.Add(-1) != 0 {
		return
	}
	k.mu.Lock()
	draining := k.draining
	k.mu.Unlock()
	if draining {
		k.closeWith(websocket.CloseGoingAway, closeShutdown, dropNone)
	}
}
