//go:build !linux

package rawconn

import "net"

// Wrap returns c: outside Linux the net package's Read and Write serve (see the package
// comment). Callers that look for TryWrite find none and wait for room as any writer does.
func Wrap(c net.Conn) net.Conn { return c }
