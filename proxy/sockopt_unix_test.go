//go:build unix

package proxy

import "syscall"

// setRcvBuf sets SO_RCVBUF of the socket fd.
func setRcvBuf(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
