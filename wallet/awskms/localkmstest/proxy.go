package localkmstest

// A TCP proxy in front of a KMS endpoint, which a test turns slow or off mid-test: what a
// KMS that stops answering, or a network that drops it, looks like to a client.

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Stall is a TCP proxy to a KMS endpoint, from Proxy. Its states: passing (the start), stalled
// (connections are accepted and their bytes held: no request reaches KMS and no answer comes
// back, as with a KMS that hangs), and refusing (the port is closed and every open connection
// reset, as with a KMS that is down). Its methods may be called from any goroutine.
type Stall struct {
	t        testing.TB
	listen   string // the proxy's address, kept across Refuse and Resume
	upstream string // KMS's host:port

	mu       sync.Mutex
	ln       net.Listener
	stalled  bool
	resumed  chan struct{} // closed when a stall ends
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
	accepted int
}

// Proxy starts a proxy on a free port of 127.0.0.1 to endpoint (an http:// URL, as Start
// returns) and stops it when t ends.
func Proxy(t testing.TB, endpoint string) *Stall {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("localkmstest.Proxy: endpoint %q is not a URL with a host", endpoint)
	}
	p := &Stall{t: t, upstream: u.Host, resumed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("localkmstest.Proxy: %v", err)
	}
	p.listen, p.ln = ln.Addr().String(), ln
	p.wg.Add(1)
	go p.accept(ln)
	t.Cleanup(p.close)
	return p
}

// Endpoint is the proxy's URL, to configure a client with instead of KMS's own.
func (p *Stall) Endpoint() string { return "http://" + p.listen }

// Accepted counts the connections the proxy has accepted: a test can check that a client
// came through it at all.
func (p *Stall) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Stall holds every byte, both ways, on open and new connections until Resume: requests hang.
func (p *Stall) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.resumed = make(chan struct{})
	}
}

// Refuse closes the proxy's port, so new connections are refused, and resets the open ones.
func (p *Stall) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a polite close
		}
		c.Close()
	}
}

// Resume ends a stall (held bytes flow on) or a refusal (the same port is opened again).
func (p *Stall) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resumed)
	}
	if p.ln == nil && !p.closed {
		ln, err := net.Listen("tcp", p.listen)
		if err != nil {
			p.t.Errorf("localkmstest.Stall.Resume: listen on %s again: %v", p.listen, err)
			return
		}
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
}

func (p *Stall) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Refuse or close
		}
		p.mu.Lock()
		if p.closed || p.ln != ln {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.accepted++
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve dials KMS for client and pipes both ways through the gate.
func (p *Stall) serve(client net.Conn) {
	defer p.wg.Done()
	done := make(chan struct{})
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
		client.Close()
	}()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	var once sync.Once
	end := func() { once.Do(func() { close(done); client.Close(); server.Close() }) }
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); defer end(); p.pipe(server, client, done) }()
	go func() { defer pipes.Done(); defer end(); p.pipe(client, server, done) }()
	pipes.Wait()
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *Stall) pipe(dst, src net.Conn, done <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(done) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a reset: the caller closes both ends
		}
	}
}

// wait blocks while the proxy is stalled; false when the connection ended meanwhile.
func (p *Stall) wait(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		stalled, resumed, closed := p.stalled, p.resumed, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !stalled {
			return true
		}
		select {
		case <-resumed:
		case <-done:
			return false
		}
	}
}

// close stops the proxy and waits for its goroutines.
func (p *Stall) close() {
	p.mu.Lock()
	p.closed = true
	if p.stalled {
		p.stalled = false
		close(p.resumed)
	}
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// String names the proxy in test messages.
func (p *Stall) String() string { return fmt.Sprintf("proxy %s -> %s", p.listen, p.upstream) }
