// A socket (one WebSocket of a JSON-RPC route) and its reader, which serves the client's messages.

package proxy

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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
	srv     *Server
	ss      *socketSet
	conn    *websocket.Conn // nil in the fuzz target: nothing is written
	bc      *batchConn      // conn's connection; nil with conn
	route   *Route
	chainID uint64
	reqID   string     // the upgrade's request id, for the logs
	hdr     reqHeaders // the upgrade's credentials, for each message's exchange
	owner   socketOwner
	expires time.Time // the access token's expiry; zero: none

	timer *time.Timer
	slots callSlots // the calls being served (maxCallsInFlightPerConn)

	// dl guards the read deadline: a message's (messageReadTimeout) while one is read, the
	// close's grace (graceUntil, once the close frame is sent) from then on.
	dl         sync.Mutex
	graceUntil time.Time

	lastRead atomic.Int64 // unix nanoseconds of the last frame from the client, of any kind
	lastMsg  atomic.Int64 // unix nanoseconds of the last message from the client
	inflight atomic.Int32 // messages being served
	dropping atomic.Bool  // the queue was dropped: the writer abandons what it took of it
	// queuedBytes is the bytes of the messages queued and not yet written (maxQueuedBytes):
	// added under mu as they are queued, taken off as the writer is done with them.
	queuedBytes atomic.Int64

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
		srv:     s,
		ss:      s.ws,
		conn:    conn,
		bc:      bc,
		route:   up.route,
		chainID: up.chainID,
		reqID:   up.reqID,
		hdr:     up.hdr,
		owner:   up.owner,
		expires: up.expires,
	}
	k.slots.init(s.ws.cfg.MaxCallsInFlightPerConn)
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

// run reads the client's messages until the connection ends, then ends the socket. A
// message must arrive whole within messageReadTimeout of its first frame's header.
func (k *socket) run() {
	defer k.finish()
	for {
		typ, r, err := k.conn.NextReader()
		if err != nil {
			return
		}
		now := time.Now()
		k.lastRead.Store(now.UnixNano())
		k.lastMsg.Store(now.UnixNano())
		k.readDeadline(now.Add(k.ss.cfg.MessageReadTimeout))
		ok := k.message(typ, r)
		k.readDeadline(time.Time{})
		if !ok {
			return
		}
	}
}

// readDeadline sets the connection's read deadline to t (zero: none), or to the close's
// grace when that ends first.
func (k *socket) readDeadline(t time.Time) {
	k.dl.Lock()
	defer k.dl.Unlock()
	if g := k.graceUntil; !g.IsZero() && (t.IsZero() || g.Before(t)) {
		t = g
	}
	_ = k.conn.SetReadDeadline(t)
}

// message handles one message of the client (typ, and r its content): a text message is
// read whole, parsed and served on a goroutine of its own once the socket's calls in
// flight leave room for its calls (meanwhile nothing more is read); anything else closes
// the socket. It reports false when the connection broke.
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
		start := time.Now()
		rec := reqRecord{websocket: true, socket: k.reqID}
		_, out := k.srv.errorAnswer(&rec, k.route, nil, k.srv.errBodiesInFlight, start)
		k.srv.logRequest(&rec, k.srv.appendRequestID(nil), k.route, 0, start)
		k.queueAnswer(nil, out, true)
		// The rest of the refused message is skipped under its deadline still: a client
		// that stalls it is closed at messageReadTimeout, not held to the ping timeout.
		if _, err := io.Copy(io.Discard, r); err != nil {
			k.readFailed(err)
			return false
		}
		return true
	case err != nil:
		k.readFailed(err)
		return false
	}
	start := time.Now()
	reqID := k.srv.appendRequestID(nil)
	ex, own := newExchange(body, buf == nil, reqID, &k.hdr, start)
	if buf != nil {
		k.srv.putBuf(buf) // newExchange copied the body
	}
	ex.Socket = k
	perr := jsonrpc.ParseInto(&ex.msg, own, k.srv.cfg.MaxBatch)
	if perr == nil && k.queuedBytes.Load() >= int64(k.ss.cfg.MaxQueuedBytes) {
		// No room for an answer: the call is not served (nothing is forwarded, nothing
		// built), and its refusal is queued (queueSize bounds those).
		k.srv.metrics.wsQueueFull.Inc()
		perr = k.ss.errQueueFull
	}
	calls := 1
	if perr == nil {
		calls = min(max(len(ex.msg.Requests), 1), k.slots.limit)
	}
	k.slots.acquire(calls)
	k.inflight.Add(1)
	k.ss.wg.Add(1)
	go func() {
		defer k.ss.wg.Done()
		k.serveMessage(ex, perr, held, calls, reqID, start)
	}()
	return true
}

// readFailed counts and logs a message that did not arrive whole within
// messageReadTimeout (err a timeout while the socket is open); the connection then ends.
func (k *socket) readFailed(err error) {
	if isTimeout(err) && k.isOpen() {
		k.srv.metrics.wsDropped[dropMessageTimeout].Inc()
		if ce := k.srv.log.Check(zapcore.DebugLevel, "websocket closed by the server"); ce != nil {
			ce.Write(zap.String("req_id", k.reqID), zap.String("reason", "message not received whole within server.websocket.messageReadTimeout"))
		}
	}
}

// isOpen reports whether the socket is open (not closing).
func (k *socket) isOpen() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state == sockOpen
}

// callSlots counts a socket's calls being served, at most limit: the reader waits for room
// before it serves a message (a batch takes as many slots as it has calls, at most limit).
// Only the reader waits.
type callSlots struct {
	mu          sync.Mutex
	room        sync.Cond
	used, limit int
}

func (c *callSlots) init(limit int) {
	c.limit = limit
	c.room.L = &c.mu
}

func (c *callSlots) acquire(n int) {
	c.mu.Lock()
	for c.used > 0 && c.used+n > c.limit {
		c.room.Wait()
	}
	c.used += n
	c.mu.Unlock()
}

func (c *callSlots) release(n int) {
	c.mu.Lock()
	c.used -= n
	c.mu.Unlock()
	c.room.Signal()
}

var (
	errMessageTooLarge = errors.New("message too large")
	errBusy            = errors.New("message bodies in flight over the budget")
)

// readMessage reads a text message whole, at most server.websocket.maxMessageBytes, into a
// buffer of getBuf (buf; nil when the message outgrew the pool: body is then its own). Each
// growth of the buffer beyond the pool's is taken from the body budget before it is
// allocated (held: to give back once answered), so that a message in part received, as a
// whole one, counts against server.maxBodyBytesInFlight.
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
			if grow := size - cap(b); grow > 0 {
				if !k.srv.budget.take(grow) {
					return fail(errBusy)
				}
				held += grow
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

// serveMessage serves the message parsed into ex (perr: the error that answers it whole)
// through the route's compiled chain and queues its answer; then it gives back the body's
// bytes (held) and the message's call slots (calls).
func (k *socket) serveMessage(ex *Exchange, perr *jsonrpc.Error, held, calls int, reqID []byte, start time.Time) {
	defer k.messageDone()
	defer k.slots.release(calls)
	rec := reqRecord{websocket: true, socket: k.reqID}
	if k.srv.tracer != nil {
		rec.trace = k.srv.startMessageTrace(k.route, reqID, k.reqID)
	}
	_, out := k.srv.answer(&rec, ex, k.route, k.chainID, perr, start)
	k.srv.logRequest(&rec, reqID, k.route, 0, start)
	if rec.trace != nil {
		endTrace(&rec, 0)
	}
	k.srv.budget.give(held)
	k.queueAnswer(ex, out, perr != nil)
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
