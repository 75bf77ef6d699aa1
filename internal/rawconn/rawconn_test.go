//go:build linux

package rawconn

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pair returns a wrapped client connection and the server's end of it, over loopback TCP.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	w, ok := Wrap(c).(*Conn)
	if !ok {
		t.Fatalf("Wrap(%T) is not a *Conn", c)
	}
	t.Cleanup(func() { w.Close(); s.Close() })
	return w, s
}

func TestWrapLeavesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(pipe) = %T, want the pipe itself", got)
	}
}

func TestReadWriteBothWays(t *testing.T) {
	c, s := pair(t)
	if n, err := c.Write([]byte("ping")); n != 4 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := io.ReadFull(s, buf[:4]); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("peer read %q, %v", buf[:n], err)
	}
	// The read waits in the poller until the peer writes.
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.Write([]byte("pong"))
	}()
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d, %v", n, err)
	}
}

// A write larger than the socket buffers waits for the peer to read, in chunks, and
// arrives whole and in order.
func TestLargeWriteAndRead(t *testing.T) {
	c, s := pair(t)
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var n int
	var werr error
	go func() {
		defer wg.Done()
		n, werr = c.Write(big)
	}()
	got, err := io.ReadAll(io.LimitReader(s, int64(len(big))))
	wg.Wait()
	if werr != nil || n != len(big) {
		t.Fatalf("Write = %d, %v", n, werr)
	}
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("peer read %d bytes, %v; equal %v", len(got), err, bytes.Equal(got, big))
	}

	// And back: Read returns at most maxChunk at a time, everything in order.
	go s.Write(big)
	got = got[:0]
	buf := make([]byte, 1<<20)
	for len(got) < len(big) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("Read after %d bytes: %v", len(got), err)
		}
		if n > maxChunk {
			t.Fatalf("Read returned %d bytes, more than maxChunk", n)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("read back a different stream")
	}
}

func TestEOF(t *testing.T) {
	c, s := pair(t)
	s.Write([]byte("last"))
	s.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if n, err := c.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v; want 0, io.EOF", n, err)
	}
}

func TestDeadlines(t *testing.T) {
	c, _ := pair(t)
	c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	_, err := c.Read(make([]byte, 4))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("the read timed out after %v, before its deadline", d)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("error %v: want a *net.OpError of op read", err)
	}

	// A deadline in the past fails the next write at once; cleared, writes work again.
	c.SetWriteDeadline(time.Unix(1, 0))
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past its deadline: %v", err)
	}
	c.SetWriteDeadline(time.Time{})
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("Write after clearing the deadline: %v", err)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 4))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
}

// Writing to a connection the peer reset fails with the system's error: no SIGPIPE kills the
// process, nothing is reported written that was not.
func TestWriteToResetPeer(t *testing.T) {
	c, s := pair(t)
	s.(*net.TCPConn).SetLinger(0) // close with a RST
	s.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = c.Write([]byte("after the reset"))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write after the peer's reset: %v, want ECONNRESET or EPIPE", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("error %v: want a *net.OpError of op write", err)
	}
}

func TestNoAllocations(t *testing.T) {
	c, s := pair(t)
	msg := []byte("0123456789")
	buf := make([]byte, len(msg))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a write and a read on each end allocate %v times, want 0", allocs)
	}
}

// TLS runs over a wrapped connection as over any net.Conn: an upstream node may be https.
func TestTLSOverConn(t *testing.T) {
	body := strings.Repeat("tls ", 50_000) // 200 KB: several TLS records and raw chunks
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	w := Wrap(c)
	if _, ok := w.(*Conn); !ok {
		t.Fatalf("Wrap(%T) is not a *Conn", c)
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tc := tls.Client(w, &tls.Config{RootCAs: roots, ServerName: "example.com"})
	defer tc.Close()
	if _, err := io.WriteString(tc, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatalf("write over TLS: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("read over TLS: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body {
		t.Fatalf("body: %d bytes, %v; want %d bytes", len(got), err, len(body))
	}
}

// TryWrite writes what the socket takes without waiting: against a peer that reads nothing
// it stops short with no error, and a Write after it sends the rest, in order.
func TestTryWrite(t *testing.T) {
	c, s := pair(t)
	big := make([]byte, 32<<20) // more than any loopback socket buffers
	for i := range big {
		big[i] = byte(i * 13)
	}
	n, err := c.TryWrite(big)
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("TryWrite = %d, %v; want a short write without error", n, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(big[n:])
		done <- err
	}()
	got, err := io.ReadAll(io.LimitReader(s, int64(len(big))))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("peer read %d bytes, %v; equal %v", len(got), err, bytes.Equal(got, big))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, err := c.TryWrite([]byte("x")); n != 1 || err != nil {
		t.Fatalf("TryWrite with room = %d, %v", n, err)
	}
}
