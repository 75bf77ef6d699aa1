//go:build linux

package main

// The client side of (w): thousands of WebSocket subscribers in this process, each one
// goroutine reading with small buffers, and the kernel's receive time of what they read.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/fasthttp/websocket"
)

// stampConn is a TCP connection that also tells when the kernel received the bytes it
// read: SO_TIMESTAMPNS, read with recvmsg. For TCP the time given with a read is the
// receive time of the last segment the read consumed; on loopback that is when the sending
// process's write reached this socket. So a delivery's time does not depend on how soon
// this process, which shares the machine with the server, got around to reading it.
type stampConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	oob  [64]byte
	last int64 // receive time (Unix ns) of the bytes of the latest read; 0 before any
}

// dialStamped connects to addr and turns on receive timestamps.
func dialStamped(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	sc, err := newStampConn(c.(*net.TCPConn))
	if err != nil {
		c.Close()
		return nil, err
	}
	return sc, nil
}

func newStampConn(c *net.TCPConn) (*stampConn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("setsockopt SO_TIMESTAMPNS: %w", serr)
	}
	return &stampConn{TCPConn: c, raw: raw}, nil
}

// Read reads like net.Conn's Read, through the runtime's poller, and records the receive
// time of the bytes read.
func (c *stampConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n, oobn int
	var err error
	rerr := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, err = syscall.Recvmsg(int(fd), p, c.oob[:], 0)
			if err != syscall.EINTR {
				break
			}
		}
		return err != syscall.EAGAIN
	})
	if rerr != nil {
		return 0, rerr
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	if ts, ok := rxTimestamp(c.oob[:oobn]); ok {
		c.last = ts
	}
	return n, nil
}

// rxTimestamp finds SCM_TIMESTAMPNS in the control messages of a recvmsg and returns it as
// Unix nanoseconds. It parses in place (syscall.ParseSocketControlMessage allocates).
func rxTimestamp(oob []byte) (int64, bool) {
	const hdr = syscall.SizeofCmsghdr
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0, false
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && l >= hdr+16 {
			sec := int64(binary.NativeEndian.Uint64(oob[hdr:]))
			nsec := int64(binary.NativeEndian.Uint64(oob[hdr+8:]))
			return sec*1e9 + nsec, true
		}
		next := (l + cmsgAlign - 1) &^ (cmsgAlign - 1)
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return 0, false
}

// cmsgAlign is the alignment of control messages on 64-bit Linux.
const cmsgAlign = 8

// delivery is one block as one subscriber got it.
type delivery struct {
	block uint64
	// first and last are the kernel receive times (Unix ns) of the block's first and last
	// notification: the same for newHeads, the first and the last log for logs.
	first, last int64
	// seen is when this process had read and parsed the last one (Unix ns).
	seen int64
}

// subscriber is one WebSocket with one subscription, and what it received.
type subscriber struct {
	conn   *websocket.Conn
	sc     *stampConn
	logs   bool   // a logs subscription: perBlock notifications per block
	sub    []byte // `"subscription":"ID"`, which every notification must hold
	got    []delivery
	cur    delivery // the block being received (logs)
	count  int      // notifications of cur so far
	bad    int      // notifications that were not what the subscription asked for
	badMsg string   // the first of them
	err    error    // why reading ended, when not closed by the bench
}

// readBufs are the buffers the subscribers read notifications into, one per message being
// read: an idle subscriber holds none.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// wsClient is the subscribers of one run against one server.
type wsClient struct {
	url      string
	header   http.Header
	perBlock int // logs per block
	dialer   websocket.Dialer
	subs     []*subscriber
	done     atomic.Int64 // blocks fully delivered, over every subscriber
	closing  atomic.Bool
	wg       sync.WaitGroup
}

func newWSClient(url string, header http.Header, perBlock int) *wsClient {
	return &wsClient{url: url, header: header, perBlock: perBlock, dialer: websocket.Dialer{
		NetDialContext:   dialStamped,
		HandshakeTimeout: 30 * time.Second,
		// A newHeads notification is about 1.2 KB; a logs subscriber reads 100 notifications
		// of about 0.7 KB per block.
		ReadBufferSize:  4096,
		WriteBufferSize: 512,
		WriteBufferPool: &sync.Pool{},
	}}
}

// subscribeAll opens heads + logs sockets, parallel dials at a time, each subscribed
// (newHeads, or logs with filter), and starts their readers.
func (wc *wsClient) subscribeAll(ctx context.Context, heads, logs, parallel int, filter string) error {
	wc.subs = make([]*subscriber, heads+logs)
	next := atomic.Int64{}
	errs := make(chan error, parallel)
	for range parallel {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(wc.subs) || ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
				params := `["newHeads"]`
				if i >= heads {
					params = `["logs",` + filter + `]`
				}
				s, err := wc.subscribe(ctx, params, i >= heads)
				if err != nil {
					next.Store(int64(len(wc.subs))) // stop the others
					errs <- fmt.Errorf("socket %d of %d: %w", i+1, len(wc.subs), err)
					return
				}
				wc.subs[i] = s
				wc.wg.Add(1)
				go wc.read(s)
			}
		}()
	}
	var all []error
	for range parallel {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// subscribe opens one socket and makes its subscription.
func (wc *wsClient) subscribe(ctx context.Context, params string, logs bool) (*subscriber, error) {
	conn, resp, err := wc.dialer.DialContext(ctx, wc.url, wc.header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial: %w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("dial: %w", err)
	}
	msg := `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":` + params + `}`
	if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send eth_subscribe: %w", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, answer, err := conn.ReadMessage()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("answer to eth_subscribe: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	id, err := subscriptionID(answer)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &subscriber{conn: conn, sc: conn.NetConn().(*stampConn), logs: logs,
		sub: []byte(`"subscription":"` + id + `"`)}, nil
}

// subscriptionID reads the answer to eth_subscribe (id 1): the subscription id.
func subscriptionID(answer []byte) (string, error) {
	const prefix = `"result":"`
	i := bytes.Index(answer, []byte(prefix))
	if i < 0 || !bytes.Contains(answer, []byte(`"id":1`)) || bytes.Contains(answer, []byte(`"error"`)) {
		return "", fmt.Errorf("eth_subscribe answered %.300s", answer)
	}
	id, _, ok := bytes.Cut(answer[i+len(prefix):], []byte(`"`))
	if !ok || len(id) < 3 || !bytes.HasPrefix(id, []byte("0x")) {
		return "", fmt.Errorf("eth_subscribe answered %.300s: not a subscription id", answer)
	}
	return string(id), nil
}

// read receives s's notifications until the socket is closed.
func (wc *wsClient) read(s *subscriber) {
	defer wc.wg.Done()
	for {
		_, r, err := s.conn.NextReader()
		if err != nil {
			if !wc.closing.Load() {
				s.err = err
			}
			return
		}
		bp := readBufs.Get().(*[]byte)
		msg, err := readMessage(r, (*bp)[:0], 1<<20)
		*bp = msg[:0]
		if err == nil {
			wc.note(s, msg)
		} else {
			s.addBad(err.Error())
		}
		readBufs.Put(bp)
	}
}

// readMessage appends the message r reads to buf, up to max bytes.
func readMessage(r io.Reader, buf []byte, max int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= max {
				return buf, fmt.Errorf("message longer than %d bytes", max)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// note records one notification of s.
func (wc *wsClient) note(s *subscriber, msg []byte) {
	now := time.Now().UnixNano()
	if !bytes.Contains(msg, s.sub) {
		s.addBad(fmt.Sprintf("not a notification of the socket's subscription: %.200s", msg))
		return
	}
	n, err := notifiedBlock(msg, s.logs)
	if err != nil {
		s.addBad(err.Error())
		return
	}
	if !s.logs {
		s.got = append(s.got, delivery{block: n, first: s.sc.last, last: s.sc.last, seen: now})
		wc.done.Add(1)
		return
	}
	if n != s.cur.block || s.count == 0 {
		if s.count != 0 {
			s.addBad(fmt.Sprintf("block %d: %d logs, want %d", s.cur.block, s.count, wc.perBlock))
		}
		s.cur, s.count = delivery{block: n, first: s.sc.last}, 0
	}
	s.count++
	if s.count == wc.perBlock {
		s.cur.last, s.cur.seen = s.sc.last, now
		s.got = append(s.got, s.cur)
		s.count = 0
		wc.done.Add(1)
	}
}

func (s *subscriber) addBad(what string) {
	if s.bad == 0 {
		s.badMsg = what
	}
	s.bad++
}

// notifiedBlock reads the block number of an eth_subscription notification: a newHeads
// header's "number", or a log's "blockNumber" (logs is set), which must not be removed.
// It scans the bytes instead of decoding them: geth and anvil write compact JSON, and a
// full decode of 110,000 notifications per block would make this process the bottleneck.
func notifiedBlock(msg []byte, logs bool) (uint64, error) {
	if !bytes.Contains(msg, []byte(`"method":"eth_subscription"`)) {
		return 0, fmt.Errorf("not an eth_subscription notification: %.200s", msg)
	}
	key := `"number":"0x`
	if logs {
		key = `"blockNumber":"0x`
		if !bytes.Contains(msg, []byte(`"removed":false`)) {
			return 0, fmt.Errorf("a log without \"removed\":false: %.200s", msg)
		}
	}
	i := bytes.Index(msg, []byte(key))
	if i < 0 {
		return 0, fmt.Errorf("no %s...\" in %.200s", key, msg)
	}
	digits, _, ok := bytes.Cut(msg[i+len(key):], []byte(`"`))
	if !ok {
		return 0, fmt.Errorf("unterminated %s...\" in %.200s", key, msg)
	}
	n, err := strconv.ParseUint(string(digits), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%s%s\": %w", key, digits, err)
	}
	return n, nil
}

// waitDone waits until want blocks have been delivered over every subscriber, or limit
// passes; it returns how many were.
func (wc *wsClient) waitDone(ctx context.Context, want int64, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for {
		got := wc.done.Load()
		if got >= want {
			return got, nil
		}
		if time.Now().After(deadline) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// close closes every socket and waits for the readers; then subs may be read.
func (wc *wsClient) close() {
	wc.closing.Store(true)
	for _, s := range wc.subs {
		if s != nil {
			s.conn.Close()
		}
	}
	wc.wg.Wait()
}
