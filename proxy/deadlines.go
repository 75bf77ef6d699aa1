package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/web3gate/web3gate/internal/rawconn"
)

// Coarse connection deadlines.
//
// fasthttp sets three deadlines per keep-alive request (the idle timeout, then the read
// timeout, then the write timeout), and a real deadline is a runtime timer moved each time:
// recording them instead saved about 0.4 µs of user CPU of a request that web3gate answers
// itself in 11 µs (measured on the bench rig, see README). watchedListener's connections only record the deadlines they are given;
// one watchdog goroutine scans the connections every deadlineTick and, for a deadline that
// has passed, sets the real deadline in the past, so that the blocked read or write fails as
// it would have: a timeout (net.Error with Timeout true), which fasthttp answers as before
// (a 408 for a request read too slowly, a quiet close for an idle connection). A deadline
// is thus enforced up to deadlineTick late; the timeouts it enforces are seconds long.

// deadlineTick is the watchdog's period, and so the most a deadline is enforced late.
const deadlineTick = 100 * time.Millisecond

// aLongTimeAgo is a deadline in the past: set on a connection, it fails its pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// watchedListener wraps accepted connections in watchedConns and runs their watchdog until
// the listener is closed and its last connection too.
type watchedListener struct {
	net.Listener
	tick time.Duration

	mu    sync.Mutex
	conns map[*watchedConn]struct{}

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the watchdog ends
}

func newWatchedListener(ln net.Listener, tick time.Duration) *watchedListener {
	l := &watchedListener{
		Listener: ln,
		tick:     tick,
		conns:    make(map[*watchedConn]struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go l.watch()
	return l
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	wc := &watchedConn{Conn: rawconn.Wrap(c), l: l}
	l.mu.Lock()
	l.conns[wc] = struct{}{}
	l.mu.Unlock()
	return wc, nil
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

// watchedConn is a connection whose deadlines the watchdog enforces.
type watchedConn struct {
	net.Conn
	l           *watchedListener
	read, write deadline
	closeOnce   sync.Once
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
	})
	return c.Conn.Close()
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
