// A socket's writer: the frames of its queued messages, written in order on the connection.

package proxy

import (
	"net"
	"sync"
	"time"
)

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
// would have waited), then batch (of size q) is counted out of the queue.
func (k *socket) goWrite(batch []outMsg, q queued, first func() bool) {
	go func() {
		defer k.ss.wg.Done()
		if first != nil && !first() {
			_ = k.conn.NetConn().Close() // broken: the reader ends, and with it the socket
		}
		k.unqueue(q)
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
				k.goWrite(batch, queued{}, nil)
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
		// The batch counts against the byte bounds until it is written (or abandoned).
		q := sizeOf(batch)
		ok := true
		if worker {
			if ok, handed = k.tryBatch(batch, q); handed {
				return true
			}
		} else {
			ok = k.writeBatch(batch)
		}
		if !ok {
			_ = k.conn.NetConn().Close() // broken: the reader ends, and with it the socket
		}
		k.unqueue(q)
		clear(batch)
	}
}

// tryBatch is writeBatch on a worker's turn (q: batch's size, counted out when a goroutine
// it hands batch to is done with it): the frames of batch, built in one buffer, are
// written as far as the connection takes them at once; the rest of the write, or all of
// batch when its frames outgrow the largest buffer or another write holds the connection,
// is handed over to a goroutine of the socket's own (handed), which goes on writing.
func (k *socket) tryBatch(batch []outMsg, q queued) (ok, handed bool) {
	size := 0
	for i := range batch {
		size += batch[i].frameLen()
	}
	c := k.bc
	if size > maxFrameBuf || !c.mu.TryLock() {
		k.goWrite(batch, q, func() bool { return k.writeBatch(batch) })
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
	k.goWrite(batch, q, func() bool {
		defer c.mu.Unlock()
		defer k.ss.fbufs.put(buf)
		_ = c.Conn.SetWriteDeadline(time.Now().Add(k.ss.cfg.WriteTimeout))
		_, err := c.Conn.Write(b[n:])
		return err == nil
	})
	return true, true
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
