package awskms

// The backend's connections to KMS, tracked so that Close can close them: the SDK's HTTP
// client is rebuilt by the SDK itself (e.g. to add AWS_CA_BUNDLE's roots), so its transport
// cannot be kept and told to close its idle connections; the dial function survives those
// copies.

import (
	"context"
	"net"
	"sync"
)

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{conns: map[*trackedConn]struct{}{}} }

// wrap returns dial with its connections tracked.
func (s *connSet) wrap(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, set: s}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			c.Close()
			return nil, errClosed
		}
		s.conns[tc] = struct{}{}
		return tc, nil
	}
}

// closeAll closes every connection and refuses new ones.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}
