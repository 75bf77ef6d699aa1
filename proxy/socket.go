package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
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

// closeGrace is how long the client has to answer the server's close frame before the
// connection is closed.
const closeGrace = 2 * time.Second

// outMsg is one queued message: an answer (body), or a notification (prefix, then body, then
// notificationEnd).
type outMsg struct {
	prefix []byte  // the subscription's prefix; nil for an answer
	body   []byte  // shared with other sockets for a notification: never modified
	buf    *[]byte // body's buffer of getBuf, given back once written; nil: not the socket's
}

var notificationEnd = []byte("}}")

// Why the server closes a socket: the label values of web3gate_websocket_dropped_total.
const (
	dropNone = iota
	dropSlowConsumer
	dropTokenExpired
	dropTooLarge
	dropBinary
	dropIdle
	dropPingTimeout
	dropReasons
)

var dropLabels = [dropReasons]string{"", "slow_consumer", "token_expired", "message_too_large", "binary_message", "idle", "ping_timeout"}

// The close reasons (at most 123 bytes each).
const (
	closeSlowConsumer = "slow consumer: outbound queue full (server.websocket.queueSize)"
	closeShutdown     = "server shutting down"
	closeTokenExpired = "access token expired"
	closeBinary       = "binary messages are not supported: send JSON-RPC as text messages"
	closePingTimeout  = "no answer to pings (server.websocket.pingInterval)"
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

// queueAnswer queues the answer out (nil: none) to the message of ex (nil: a message refused
// before it was parsed), then the notifications held by the subscriptions ex made.
func (k *socket) queueAnswer(ex *Exchange, out *[]byte) {
	k.mu.Lock()
	if k.state != sockOpen {
		k.mu.Unlock()
		if out != nil {
			k.srv.putBuf(out)
		}
		return
	}
	if out != nil {
		if k.queued >= k.ss.cfg.QueueSize {
			k.overflowLocked()
			k.srv.putBuf(out)
			return
		}
		k.queue = append(k.ss.queues.grow(k.queue, 1), outMsg{body: *out, buf: out})
		k.queued++
	}
	if ex != nil {
		kept := k.pending[:0]
		for _, s := range k.pending {
			if s.ex != ex {
				kept = append(kept, s)
				continue
			}
			k.queue = append(k.ss.queues.grow(k.queue, len(s.held)), s.held...)
			s.held, s.ex = nil, nil
		}
		clear(k.pending[len(kept):])
		k.pending = kept
	}
	if len(k.queue) > 0 {
		k.startWriterLocked()
	}
	k.mu.Unlock()
}

// notify queues the notifications of s with results, in order (see Subscription.Notify and
// NotifyAll). Over the queue's limit, the socket is closed (a slow consumer) and none of
// them is queued: the close drops what is queued anyway.
func (k *socket) notify(s *subscription, results ...[]byte) {
	k.mu.Lock()
	if s.ended || k.state != sockOpen {
		k.mu.Unlock()
		return
	}
	if k.queued+len(results) > k.ss.cfg.QueueSize {
		k.overflowLocked()
		return
	}
	k.queued += len(results)
	if s.ex != nil {
		for _, r := range results {
			s.held = append(s.held, outMsg{prefix: s.prefix, body: r})
		}
		k.mu.Unlock()
		return
	}
	q := k.ss.queues.grow(k.queue, len(results))
	for _, r := range results {
		q = append(q, outMsg{prefix: s.prefix, body: r})
	}
	k.queue = q
	k.startWriterLocked()
	k.mu.Unlock()
}

// overflowLocked closes a socket whose queue is full (a slow consumer): what is queued is
// dropped, and the close frame follows what the writer is writing. It releases k.mu. Its
// subscriptions end on another goroutine: notify runs in a feed's delivery, which their
// ends call into.
func (k *socket) overflowLocked() {
	subs, ok := k.closeLocked(websocket.ClosePolicyViolation, closeSlowConsumer, true)
	k.mu.Unlock()
	if !ok {
		return
	}
	k.closed(websocket.ClosePolicyViolation, closeSlowConsumer, dropSlowConsumer)
	if len(subs) > 0 {
		k.ss.wg.Add(1)
		go func() {
			defer k.ss.wg.Done()
			k.endSubs(subs)
		}()
	}
}

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

// takeSubsLocked ends every subscription of the socket, with k.mu held, and returns them
// for endSubs.
func (k *socket) takeSubsLocked() []*subscription {
	if len(k.subs) == 0 {
		return nil
	}
	subs := make([]*subscription, 0, len(k.subs))
	for _, s := range k.subs {
		s.ended = true
		k.queued -= len(s.held)
		s.held = nil
		subs = append(subs, s)
	}
	k.subs, k.pending = nil, nil
	return subs
}

// endSubs runs the stop funcs of subscriptions that ended, without k.mu.
func (k *socket) endSubs(subs []*subscription) {
	for _, s := range subs {
		k.srv.metrics.wsSubs[s.kind].Dec()
		if s.stop != nil {
			s.stop()
		}
	}
}

// dropQueueLocked drops what is queued, with k.mu held; the writer abandons what it took.
func (k *socket) dropQueueLocked() {
	for i := range k.queue {
		if b := k.queue[i].buf; b != nil {
			k.srv.putBuf(b)
		}
	}
	k.queued -= len(k.queue)
	clear(k.queue)
	k.queue = k.queue[:0]
	k.dropping.Store(true)
}

// startWriterLocked starts the writer unless it runs, with k.mu held: a turn on one of the
// socket set's writer workers (see writers), or, for a connection that cannot be written
// without waiting, a goroutine of its own.
func (k *socket) startWriterLocked() {
	if k.writing || k.conn == nil {
		return
	}
	k.writing = true
	k.ss.wg.Add(1)
	if k.bc.try == nil {
		go k.write()
		return
	}
	k.ss.writers.add(k)
}

// maxSpare is the largest queue array a socket keeps while it has nothing to write.
const maxSpare = 64

// write is the socket's writer on a goroutine of its own.
func (k *socket) write() {
	defer k.ss.wg.Done()
	k.writeQueued(nil, false)
}

// goWrite goes on with the writer on a goroutine of its own: a worker's turn hands it over
// when a write would wait. first, when not nil, runs first (the rest of the write that
// would have waited).
func (k *socket) goWrite(batch []outMsg, first func() bool) {
	go func() {
		defer k.ss.wg.Done()
		if first != nil && !first() {
			_ = k.conn.NetConn().Close() // broken: the reader ends, and with it the socket
		}
		clear(batch)
		k.writeQueued(batch, false)
	}()
}

// writeQueued writes what is queued, in order (batch is the writer's other queue array; nil:
// the socket's spare one), then the close frame once the socket is closing, until nothing
// is left. On a worker's
// turn (worker), it writes only what the connection takes without waiting, and hands the
// rest over to a goroutine of its own (goWrite): it reports whether it did.
func (k *socket) writeQueued(batch []outMsg, worker bool) (handed bool) {
	for {
		k.mu.Lock()
		if batch == nil {
			batch, k.spare = k.spare, nil
		}
		if len(k.queue) == 0 {
			frame := k.closeFrame
			if frame == nil || k.closeSent {
				k.writing = false
				if cap(batch) <= maxSpare {
					k.spare = batch[:0]
				} else {
					k.ss.queues.put(batch)
				}
				if cap(k.queue) > maxSpare {
					k.ss.queues.put(k.queue)
					k.queue = nil
				}
				k.mu.Unlock()
				return false
			}
			if worker {
				k.mu.Unlock()
				k.goWrite(batch, nil)
				return true
			}
			k.closeSent = true
			k.mu.Unlock()
			k.sendClose(frame)
			continue
		}
		batch, k.queue = k.queue, batch[:0]
		k.queued -= len(batch)
		k.mu.Unlock()
		ok := true
		if worker {
			if ok, handed = k.tryBatch(batch); handed {
				return true
			}
		} else {
			ok = k.writeBatch(batch)
		}
		if !ok {
			_ = k.conn.NetConn().Close() // broken: the reader ends, and with it the socket
		}
		clear(batch)
	}
}

// tryBatch is writeBatch on a worker's turn: the frames of batch, built in one buffer, are
// written as far as the connection takes them at once; the rest of the write, or all of
// batch when its frames outgrow the largest buffer or another write holds the connection,
// is handed over to a goroutine of the socket's own (handed), which goes on writing.
func (k *socket) tryBatch(batch []outMsg) (ok, handed bool) {
	size := 0
	for i := range batch {
		size += batch[i].frameLen()
	}
	c := k.bc
	if size > maxFrameBuf || !c.mu.TryLock() {
		k.goWrite(batch, func() bool { return k.writeBatch(batch) })
		return true, true
	}
	if k.dropping.Load() {
		c.mu.Unlock()
		k.release(batch)
		return true, false
	}
	buf := k.ss.fbufs.get(size)
	b := (*buf)[:0]
	for i := range batch {
		m := &batch[i]
		b = appendFrameHeader(b, m.payloadLen())
		if m.prefix != nil {
			b = append(b, m.prefix...)
		}
		b = append(b, m.body...)
		if m.prefix != nil {
			b = append(b, notificationEnd...)
		}
		if m.buf != nil {
			k.srv.putBuf(m.buf)
		}
	}
	*buf = b
	k.srv.metrics.wsOut.Add(float64(len(batch)))
	// No deadline for a write that does not wait (and none left over from the last one
	// that did, which the watchdog may have enforced since).
	_ = c.Conn.SetWriteDeadline(time.Time{})
	n, err := c.try(b)
	if err != nil || n == len(b) {
		c.mu.Unlock()
		k.ss.fbufs.put(buf)
		return err == nil, false
	}
	// The connection takes no more now: a goroutine of the socket's own writes the rest,
	// waiting for room (up to the write timeout), and releases the connection.
	k.goWrite(batch, func() bool {
		defer c.mu.Unlock()
		defer k.ss.fbufs.put(buf)
		_ = c.Conn.SetWriteDeadline(time.Now().Add(k.ss.cfg.WriteTimeout))
		_, err := c.Conn.Write(b[n:])
		return err == nil
	})
	return true, true
}

// writers run the writers of the sockets of a set on a few worker goroutines, as many as
// GOMAXPROCS at most, started while sockets wait for their turn: a socket whose queue
// was empty gets a turn (writeQueued on a worker), in the order they asked, rather than a
// goroutine of its own each time (which a block's notifications would start for every
// subscriber). A turn never waits on a connection: a write that would wait is handed over
// to a goroutine of the socket's own (see tryBatch).
type writers struct {
	mu      sync.Mutex
	ready   []*socket // waiting for their turn, from head on
	head    int
	workers int // running
}

// add gives k a turn, and starts a worker unless enough run.
func (w *writers) add(k *socket) {
	w.mu.Lock()
	w.ready = append(w.ready, k)
	start := w.workers < runtime.GOMAXPROCS(0)
	if start {
		w.workers++
	}
	w.mu.Unlock()
	if start {
		go w.work()
	}
}

// work is a worker: it runs the turns until no socket waits.
func (w *writers) work() {
	for {
		w.mu.Lock()
		if w.head == len(w.ready) {
			w.ready, w.head = w.ready[:0], 0
			w.workers--
			w.mu.Unlock()
			return
		}
		k := w.ready[w.head]
		w.ready[w.head] = nil
		w.head++
		w.mu.Unlock()
		if !k.writeQueued(nil, true) {
			k.ss.wg.Done()
		}
	}
}

// writeBatch writes the messages of batch, their frames built in one buffer of
// socketSet.fbufs and sent in one write (several when they outgrow it); false when the
// connection broke. The connection's mutex is held meanwhile: the pings and pongs the
// websocket.Conn writes go between the writes, never inside a frame. Once the queue is
// dropped (dropping), what is not yet sent is abandoned, at a frame's boundary.
func (k *socket) writeBatch(batch []outMsg) bool {
	size := 0
	for i := range batch {
		size += batch[i].frameLen()
	}
	buf := k.ss.fbufs.get(size)
	c := k.bc
	c.mu.Lock()
	_ = c.Conn.SetWriteDeadline(time.Now().Add(k.ss.cfg.WriteTimeout))
	b := (*buf)[:0]
	written, broken := 0, false
	// write writes p; false once the connection broke.
	write := func(p []byte) bool {
		if _, err := c.Conn.Write(p); err != nil {
			broken = true
		}
		return !broken
	}
	// send writes what b holds, whole frames; false once the connection broke or the queue
	// was dropped.
	send := func() bool {
		if k.dropping.Load() || (len(b) > 0 && !write(b)) {
			return false
		}
		b = b[:0]
		return true
	}
	i := 0
	for ; i < len(batch); i++ {
		m := &batch[i]
		n := m.payloadLen()
		if len(b)+frameHeaderLen(n)+n > cap(b) && !send() {
			break
		}
		b = appendFrameHeader(b, n)
		if m.prefix != nil {
			b = append(b, m.prefix...)
		}
		if len(b)+n <= cap(b) {
			b = append(b, m.body...)
			if m.prefix != nil {
				b = append(b, notificationEnd...)
			}
		} else {
			// Longer than the buffer: the frame's start is sent, then the rest from where
			// it is (once the frame's start is out, its end follows).
			if !send() || !write(m.body) || (m.prefix != nil && !write(notificationEnd)) {
				break
			}
		}
		if m.buf != nil {
			k.srv.putBuf(m.buf)
		}
		written++
	}
	if i == len(batch) {
		send()
	} else {
		k.release(batch[i:])
	}
	c.mu.Unlock()
	*buf = b
	k.ss.fbufs.put(buf)
	k.srv.metrics.wsOut.Add(float64(written))
	return !broken
}

// batchConn is a socket's connection as its websocket.Conn writes to it (the upgrade's
// answer, the control frames): every write to the connection goes through mu, which the
// socket's writer holds while it writes its frames (see writeBatch).
type batchConn struct {
	net.Conn
	mu sync.Mutex
	// try writes without waiting (see rawconn.Conn.TryWrite); nil when the connection
	// cannot.
	try func(p []byte) (int, error)
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Write(p)
}

// release gives back the buffers of messages that will not be written.
func (k *socket) release(msgs []outMsg) {
	for i := range msgs {
		if b := msgs[i].buf; b != nil {
			k.srv.putBuf(b)
		}
	}
}

// sendClose writes the close frame and gives the client closeGrace to answer it.
func (k *socket) sendClose(frame []byte) {
	if err := k.conn.WriteControl(websocket.CloseMessage, frame, time.Now().Add(k.ss.cfg.WriteTimeout)); err != nil {
		_ = k.conn.NetConn().Close()
		return
	}
	_ = k.conn.SetReadDeadline(time.Now().Add(closeGrace))
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

// onPing answers a ping with a pong, as gorilla's default handler does, and notes that the
// client is there.
func (k *socket) onPing(data string) error {
	k.lastRead.Store(time.Now().UnixNano())
	err := k.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(k.ss.cfg.WriteTimeout))
	var ne net.Error
	if err == nil || errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ne) {
		return nil
	}
	return err
}

// onPong notes that the client is there.
func (k *socket) onPong(string) error {
	k.lastRead.Store(time.Now().UnixNano())
	return nil
}

// tick runs the socket's timer: the access token's expiry, the peer that answers nothing,
// the idle timeout, the ping; then the next tick.
func (k *socket) tick() {
	now := time.Now()
	cfg := &k.ss.cfg
	k.mu.Lock()
	open, idle := k.state == sockOpen, len(k.subs) == 0
	k.mu.Unlock()
	switch {
	case !open:
		return
	case !k.expires.IsZero() && !now.Before(k.expires):
		k.closeWith(websocket.ClosePolicyViolation, closeTokenExpired, dropTokenExpired)
		return
	case k.inflight.Load() == 0 && now.UnixNano()-k.lastRead.Load() > int64(2*cfg.PingInterval):
		// (While the reader serves a message itself it reads no pong: a socket with messages
		// in progress is not a silent peer.)
		k.closeWith(websocket.CloseGoingAway, closePingTimeout, dropPingTimeout)
		return
	case idle && k.inflight.Load() == 0 && now.UnixNano()-k.lastMsg.Load() >= int64(cfg.IdleTimeout):
		k.closeWith(websocket.CloseNormalClosure, k.ss.closeIdle, dropIdle)
		return
	}
	k.mu.Lock()
	ping := now.Sub(k.lastPing) >= cfg.PingInterval
	if ping {
		k.lastPing = now
	}
	k.mu.Unlock()
	if ping {
		// An error is the connection's: its reader sees it too.
		_ = k.conn.WriteControl(websocket.PingMessage, nil, now.Add(cfg.WriteTimeout))
	}
	k.mu.Lock()
	if k.state == sockOpen {
		k.timer.Reset(k.nextTick(now, idle))
	}
	k.mu.Unlock()
}

// nextTick is the time to the socket's next tick after now, with k.mu held.
func (k *socket) nextTick(now time.Time, idle bool) time.Duration {
	cfg := &k.ss.cfg
	next := k.lastPing.Add(cfg.PingInterval)
	if t := time.Unix(0, k.lastRead.Load()).Add(2*cfg.PingInterval + time.Millisecond); t.Before(next) {
		next = t
	}
	if t := time.Unix(0, k.lastMsg.Load()).Add(cfg.IdleTimeout); idle && t.Before(next) {
		next = t
	}
	if !k.expires.IsZero() && k.expires.Before(next) {
		next = k.expires
	}
	return max(next.Sub(now), 10*time.Millisecond)
}

// Subscribe implements Socket.
func (k *socket) Subscribe(c *Call, kind string) (Subscription, error) {
	id := jsonrpc.NewID()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state != sockOpen || k.draining {
		return nil, errSocketClosing
	}
	if len(k.subs) >= k.ss.cfg.MaxSubscriptionsPerConn {
		return nil, k.ss.errTooManySubs
	}
	s := &subscription{k: k, id: id, kind: kindIndex(kind), ex: c.Exchange}
	s.prefix = fmt.Appendf(make([]byte, 0, 96+len(id)), `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"%s","result":`, id)
	if k.subs == nil {
		k.subs = map[string]*subscription{}
	}
	k.subs[id] = s
	k.pending = append(k.pending, s)
	k.srv.metrics.wsSubs[s.kind].Inc()
	return s, nil
}

// Unsubscribe implements Socket.
func (k *socket) Unsubscribe(id string) bool {
	k.mu.Lock()
	s := k.subs[id]
	if s == nil {
		k.mu.Unlock()
		return false
	}
	delete(k.subs, id)
	s.ended = true
	k.queued -= len(s.held)
	s.held = nil
	for i, p := range k.pending {
		if p == s {
			k.pending = append(k.pending[:i], k.pending[i+1:]...)
			break
		}
	}
	if len(k.subs) == 0 && k.timer != nil && k.state == sockOpen {
		k.timer.Reset(k.nextTick(time.Now(), true)) // idle now: the idle timeout runs
	}
	k.mu.Unlock()
	k.endSubs([]*subscription{s})
	return true
}

var errSocketClosing = &jsonrpc.Error{Code: -32000, Message: "the connection is closing: open a new one"}

// subscription is one subscription of a socket (Subscription). Its fields after prefix are
// guarded by its socket's mu.
type subscription struct {
	k      *socket
	id     string
	kind   int
	prefix []byte // {"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":ID,"result":

	ex    *Exchange // pending: the exchange whose answer goes first; nil once active
	held  []outMsg  // the notifications while pending
	stop  func()
	ended bool
}

var _ Subscription = (*subscription)(nil)

func (s *subscription) ID() string { return s.id }

func (s *subscription) Notify(result []byte) { s.k.notify(s, result) }

func (s *subscription) NotifyAll(results [][]byte) {
	if len(results) > 0 {
		s.k.notify(s, results...)
	}
}

func (s *subscription) OnEnd(stop func()) {
	s.k.mu.Lock()
	if !s.ended {
		s.stop = stop
		s.k.mu.Unlock()
		return
	}
	s.k.mu.Unlock()
	stop()
}

// subscriptionKinds are the label values of web3gate_websocket_subscriptions.
var subscriptionKinds = []string{"newHeads", "logs", "syncing", "other"}

func kindIndex(kind string) int {
	for i, k := range subscriptionKinds[:len(subscriptionKinds)-1] {
		if k == kind {
			return i
		}
	}
	return len(subscriptionKinds) - 1
}
