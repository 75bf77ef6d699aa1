// A socket's timer and control frames: pings and pongs, the idle timeout, the token's expiry.

package proxy

import (
	"errors"
	"net"
	"time"

	"github.com/fasthttp/websocket"
)

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
