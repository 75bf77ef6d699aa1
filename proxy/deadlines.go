package proxy

import (
	"bytes"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/web3gate/web3gate/internal/rawconn"
)

// Coarse connection deadlines.
//
// fasthttp sets three deadlines per keep-alive request (the idle timeout, then the read
// timeout, then the write timeout), each from a reading of the clock, and a real deadline
// is a runtime timer moved each time. web3gate gives fasthttp no timeouts: its connections
// keep the timeouts themselves. Each connection follows its own reads and writes (waiting
// for a request, reading it, writing the answer), and at each change records the deadline
// of the new phase from a clock the watchdog reads once per tick: no clock reading and no
// timer per request. One watchdog goroutine scans the connections every deadlineTick and,
// for a deadline that has passed, sets the real deadline in the past, so that the blocked
// read or write fails as it would have: a timeout (net.Error with Timeout true), which
// fasthttp answers as it answers its own timeouts (a 408 for a request read too slowly, a
// quiet close for an idle connection). A deadline is recorded one tick long, so that the
// coarse clock (up to a tick behind) never makes it early, and is enforced up to a tick after
// it: each timeout holds between its length and its length plus two ticks (200 ms); the
// timeouts are seconds long. What this saves per request: docs/performance.md, "Notes from
// the code", proxy.
//
// A request's head (and what fasthttp reads of its body before calling the handler, up to
// streamedBodyOver bytes) has the header timeout, shorter than the read timeout; a handler
// that goes on to read the body gives it the rest of the read timeout (readingBody). Both run
// from the request's first byte.

// deadlineTick is the watchdog's period, the step of its coarse clock and the most a
// deadline is enforced late: a timeout holds for its length plus up to two ticks.
const deadlineTick = 100 * time.Millisecond

// aLongTimeAgo is a deadline in the past: set on a connection, it fails its pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// watchedListener wraps accepted connections in watchedConns and runs their watchdog until
// the listener is closed and its last connection too. With limits, it refuses the
// connections over them (see connLimits).
type watchedListener struct {
	net.Listener
	tick     time.Duration
	timeouts timeouts
	limits   *connLimits  // nil: none
	now      atomic.Int64 // unix nanoseconds at the watchdog's last tick

	mu    sync.Mutex
	conns map[*watchedConn]struct{}

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the watchdog ends
}

// timeouts are a connection's: to read a request's head (and, on a new connection, to
// receive its first byte), to read the whole request (from its first byte), to write an
// answer, and to wait idle for the next request. Zero: none; header is at most read.
type timeouts struct {
	header, read, write, idle time.Duration
}

func newWatchedListener(ln net.Listener, tick time.Duration, to timeouts, limits *connLimits) *watchedListener {
	if to.header <= 0 || to.header > to.read {
		to.header = to.read
	}
	l := &watchedListener{
		Listener: ln,
		tick:     tick,
		timeouts: to,
		limits:   limits,
		conns:    make(map[*watchedConn]struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.now.Store(time.Now().UnixNano())
	go l.watch()
	return l
}

// Accept returns the next connection within the limits; those over them are answered and
// closed here, never handed to the server.
func (l *watchedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if l.limits != nil && !l.limits.admit(c, ip) {
			continue
		}
		wc := &watchedConn{Conn: rawconn.Wrap(c), l: l, ip: ip}
		l.mu.Lock()
		l.conns[wc] = struct{}{}
		l.mu.Unlock()
		return wc, nil
	}
}

// remoteIP is the source address of c (the zero Addr when it has none).
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Close closes the listener. The watchdog goes on until the last connection is closed: a
// server draining its connections still enforces their deadlines.
func (l *watchedListener) Close() error {
	err := l.Listener.Close()
	l.stopOnce.Do(func() { close(l.stop) })
	return err
}

// watch fires the deadlines that have passed, every tick, until the listener is closed and
// has no connection left.
func (l *watchedListener) watch() {
	defer close(l.done)
	t := time.NewTicker(l.tick)
	defer t.Stop()
	var (
		batch   []*watchedConn
		closing bool
		stop    = l.stop
	)
	for {
		select {
		case <-stop:
			closing, stop = true, nil
		case now := <-t.C:
			n := now.UnixNano()
			l.now.Store(n)
			l.mu.Lock()
			left := len(l.conns)
			for c := range l.conns {
				if c.read.due(n) || c.write.due(n) {
					batch = append(batch, c)
				}
			}
			l.mu.Unlock()
			if closing && left == 0 {
				return
			}
			for _, c := range batch {
				c.read.fire(n, c.Conn.SetReadDeadline)
				c.write.fire(n, c.Conn.SetWriteDeadline)
			}
			clear(batch)
			batch = batch[:0]
		}
	}
}

// watchedConn is a connection that keeps its timeouts (Read, Write) and whose deadlines the
// watchdog enforces.
type watchedConn struct {
	net.Conn
	l           *watchedListener
	ip          netip.Addr
	read, write deadline
	phase       uint8 // of the server's exchange on the connection; only Read and Write use it
	closeOnce   sync.Once
	// socket is set when the connection carries a WebSocket (see startSocket), before its
	// socket's first read or write: Read and Write then record no HTTP timeout, and only the
	// deadlines the socket sets hold (enforced by the watchdog as any other).
	socket bool

	// Of the request being read: the coarse time of its first byte, and the start of its
	// request line (line, lineDone: all of it), for the answer to a head fasthttp could not
	// read. Written by Read, read by the handlers of the same request, on one goroutine.
	started  int64
	line     [headSample]byte
	lineLen  uint8
	lineDone bool
	// linger: the server answered a request it could not read whole (a head or body too
	// large) and the client may still be sending it; Close lingers (lingerClose).
	linger bool
}

// headSample is how much of a request line a connection keeps: the method and enough of the
// path to tell the route's kind (JSON-RPC or REST).
const headSample = 96

// The phases of a connection, as the server's reads and writes show them.
const (
	phaseNew     uint8 = iota // accepted, nothing read yet: the header timeout runs
	phaseIdle                 // waiting for the first byte of a request: the idle timeout runs
	phaseReading              // reading a request: the header timeout runs from its first byte (then readingBody)
	phaseWriting              // writing the answer: the write timeout runs
)

// Read reads, recording the deadline of the phase it starts: waiting for a request (after
// an answer: the idle timeout; on a new connection: the header timeout), then reading its
// head once its first bytes arrive (the header timeout, from then). fasthttp reads only
// between requests and while reading one (it asks for the next request's first byte after
// the answer is written), so a read after a write waits for a new request. A request that
// arrived whole with the previous one (pipelined) is read without any read call, and the
// idle timeout covers the rest of it.
func (c *watchedConn) Read(p []byte) (int, error) {
	if c.socket {
		return c.Conn.Read(p)
	}
	switch c.phase {
	case phaseNew:
		c.phase = phaseIdle
		c.arm(&c.read, c.l.timeouts.header, c.Conn.SetReadDeadline)
	case phaseWriting:
		c.phase = phaseIdle
		c.write.setAt(0, c.Conn.SetWriteDeadline)
		c.arm(&c.read, c.l.timeouts.idle, c.Conn.SetReadDeadline)
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if c.phase == phaseIdle {
			c.startRequest()
		}
		if !c.lineDone {
			c.sample(p[:n])
		}
	}
	return n, err
}

// startRequest starts reading a request: the header timeout runs from now.
func (c *watchedConn) startRequest() {
	c.phase = phaseReading
	c.started = c.l.now.Load()
	c.lineLen, c.lineDone = 0, false
	c.arm(&c.read, c.l.timeouts.header, c.Conn.SetReadDeadline)
}

// sample keeps the start of the request line from the bytes just read, up to headSample
// bytes, and notes its end. Blank lines before a request line are skipped, as fasthttp
// skips them.
func (c *watchedConn) sample(p []byte) {
	if c.lineLen == 0 {
		for len(p) > 0 && (p[0] == '\r' || p[0] == '\n') {
			p = p[1:]
		}
	}
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		p, c.lineDone = p[:i], true
	}
	c.lineLen += uint8(copy(c.line[c.lineLen:], p))
}

// requestLine returns the start of the current request's line as read (up to headSample
// bytes) and whether it holds all of it.
func (c *watchedConn) requestLine() ([]byte, bool) { return c.line[:c.lineLen], c.lineDone }

// readingBody gives the rest of the current request the read timeout, counted from its first
// byte, in place of the header timeout: a handler calls it before it reads a body that did
// not come with the head. For a pipelined request (its head read without a read call),
// the read timeout runs from now.
func (c *watchedConn) readingBody() {
	if c.phase != phaseReading {
		c.write.setAt(0, c.Conn.SetWriteDeadline)
		c.startRequest()
	}
	c.lineDone = true // the head is read: nothing more to sample
	if c.l.timeouts.read > 0 {
		c.read.setAt(c.started+int64(c.l.timeouts.read+c.l.tick), c.Conn.SetReadDeadline)
	}
}

// Write writes; the first write of an answer records the write timeout's deadline.
func (c *watchedConn) Write(p []byte) (int, error) {
	if c.socket {
		return c.Conn.Write(p)
	}
	if c.phase != phaseWriting {
		c.phase = phaseWriting
		c.arm(&c.write, c.l.timeouts.write, c.Conn.SetWriteDeadline)
	}
	return c.Conn.Write(p)
}

// arm records d's deadline timeout from now by the coarse clock, one tick long (none for a
// zero timeout).
func (c *watchedConn) arm(d *deadline, timeout time.Duration, real func(time.Time) error) {
	var at int64
	if timeout > 0 {
		at = c.l.now.Load() + int64(timeout+c.l.tick)
	}
	d.setAt(at, real)
}

func (c *watchedConn) SetDeadline(t time.Time) error {
	c.read.set(t, c.Conn.SetReadDeadline)
	c.write.set(t, c.Conn.SetWriteDeadline)
	return nil
}

func (c *watchedConn) SetReadDeadline(t time.Time) error {
	c.read.set(t, c.Conn.SetReadDeadline)
	return nil
}

func (c *watchedConn) SetWriteDeadline(t time.Time) error {
	c.write.set(t, c.Conn.SetWriteDeadline)
	return nil
}

func (c *watchedConn) Close() error {
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		if c.l.limits != nil {
			c.l.limits.release(c.ip)
		}
	})
	if c.linger && lingerClose(c.Conn) {
		return nil
	}
	return c.Conn.Close()
}

// Lingering close. A connection closed while the client is still sending a request the
// server refused unread (a 40 KB URI, a head over maxHeaderBytes) has unread bytes in its
// receive buffer, and closing it then makes the kernel send a reset, which can reach the
// client before it reads the answer: it sees "connection reset" instead of the 414. So such a
// connection is half-closed (the answer ends with a FIN), and what the client still sends is
// read and dropped for up to lingerTime or lingerBytes, as nginx's lingering_close does, on
// at most maxLingering connections at once (beyond: closed at once).
const (
	lingerTime   = time.Second
	lingerBytes  = 256 << 10
	maxLingering = 64
)

var lingering atomic.Int32

// lingerClose closes conn after lingering in a goroutine of its own; false when it cannot
// (not a TCP connection, or too many lingering already): the caller closes it.
func lingerClose(conn net.Conn) bool {
	hc, ok := conn.(interface{ CloseWrite() error })
	if !ok {
		return false
	}
	if lingering.Add(1) > maxLingering {
		lingering.Add(-1)
		return false
	}
	go func() {
		defer lingering.Add(-1)
		defer conn.Close()
		if hc.CloseWrite() != nil || conn.SetReadDeadline(time.Now().Add(lingerTime)) != nil {
			return
		}
		_, _ = io.CopyN(io.Discard, conn, lingerBytes)
	}()
	return true
}

// deadline is one direction's deadline: recorded by set, enforced by fire.
type deadline struct {
	at    atomic.Int64 // unix nanoseconds; 0: none
	fired atomic.Bool  // the real deadline is in the past, set by fire
	mu    sync.Mutex   // orders fire and the undoing of a fired deadline
}

// set records t (zero: no deadline). When the watchdog had fired the previous deadline,
// the real one is cleared, so that the new deadline holds.
func (d *deadline) set(t time.Time, real func(time.Time) error) {
	var v int64
	if !t.IsZero() {
		v = max(t.UnixNano(), 1)
	}
	d.setAt(v, real)
}

// setAt is set of a deadline in unix nanoseconds (0: none).
func (d *deadline) setAt(v int64, real func(time.Time) error) {
	d.at.Store(v)
	if d.fired.Load() {
		d.mu.Lock()
		if d.fired.Load() {
			_ = real(time.Time{}) // an error is the connection's, and its next I/O reports it
			d.fired.Store(false)
		}
		d.mu.Unlock()
	}
}

// due reports whether the deadline has passed at now and is not yet enforced.
func (d *deadline) due(now int64) bool {
	v := d.at.Load()
	return v != 0 && v <= now && !d.fired.Load()
}

// fire enforces a deadline that has passed at now by setting the real one in the past. Should
// set move the deadline meanwhile (it saw fired still false, so left the real deadline), fire
// sees the change and undoes itself.
func (d *deadline) fire(now int64, real func(time.Time) error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.at.Load()
	if v == 0 || v > now || d.fired.Load() {
		return
	}
	d.fired.Store(true)
	_ = real(aLongTimeAgo)
	if d.at.Load() != v {
		_ = real(time.Time{})
		d.fired.Store(false)
	}
}
