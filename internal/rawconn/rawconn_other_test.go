//go:build !linux

package rawconn

import (
	"net"
	"testing"
)

func TestWrapReturnsConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := Wrap(c); got != c {
		t.Fatalf("Wrap(%T) = %T, want the connection itself", c, got)
	}
}
