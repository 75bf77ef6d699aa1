//go:build linux

package rawconn

import (
	"io"
	"net"
	"os"
	"syscall"
)

// maxChunk is the most one read(2) or write(2) copies: small enough that a raw call takes
// tens of microseconds at most (docs/performance.md, "Notes from the code", internal/rawconn).
const maxChunk = 64 << 10

// Conn is a TCP connection whose Read and Write are raw system calls on its socket. It is
// safe for one reader and one writer at a time, as the net package's connections are used.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The read in progress: its buffer, and what read(2) answered. readf is c.read, bound
	// once, so that a Read allocates no closure.
	rbuf  []byte
	rn    int
	rerr  error
	readf func(fd uintptr) bool

	// The write in progress: what is left of its buffer, what was written and the error;
	// noWait: a TryWrite, which does not wait for room.
	wbuf   []byte
	wn     int
	werr   error
	noWait bool
	writef func(fd uintptr) bool
}

// Wrap returns c as a *Conn when it is a *net.TCPConn, and c itself otherwise.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rw := &Conn{TCPConn: tc, rc: rc}
	rw.readf = rw.read
	rw.writef = rw.write
	return rw
}

// Read reads as net.Conn's Read does: at least one byte, io.EOF at the end of the stream, a
// timeout error after the read deadline, an error after Close.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = p[:min(len(p), maxChunk)], 0, nil
	err := c.rc.Read(c.readf)
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, renamed(err, "read")
	case c.rerr != nil:
		return 0, c.opError("read", c.rerr)
	case c.rn == 0:
		return 0, io.EOF
	}
	return c.rn, nil
}

// Write writes all of p, or returns the error that stopped it with the count written.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wbuf, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.writef)
	c.wbuf = nil
	switch {
	case err != nil:
		err = renamed(err, "write")
	case c.werr != nil:
		err = c.opError("write", c.werr)
	}
	return c.wn, err
}

// TryWrite writes as much of p as the socket takes now, without waiting for room: when its
// send buffer fills up, it returns the count written (less than len(p)) and no error. An
// error is Write's.
func (c *Conn) TryWrite(p []byte) (int, error) {
	c.noWait = true
	n, err := c.Write(p)
	c.noWait = false
	return n, err
}

// read is the RawConn read callback: false asks the poller to wait for data.
func (c *Conn) read(fd uintptr) bool {
	for {
		n, e := sysRead(fd, c.rbuf)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.rn = n
		default:
			c.rerr = os.NewSyscallError("read", e)
		}
		return true
	}
}

// write is the RawConn write callback: false asks the poller to wait for room.
func (c *Conn) write(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		b := c.wbuf[:min(len(c.wbuf), maxChunk)]
		n, e := sysWrite(fd, b)
		switch {
		case e == 0 && n > 0:
			c.wn += n
			c.wbuf = c.wbuf[n:]
		case e == 0:
			c.werr = io.ErrShortWrite // write(2) of a non-empty buffer never answers 0
			return true
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return c.noWait
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// renamed names the operation of an error of the RawConn ("raw-read", "raw-write") as
// net.Conn's Read and Write name theirs.
func renamed(err error, op string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
	}
	return err
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
