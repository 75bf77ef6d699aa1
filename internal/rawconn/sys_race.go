//go:build linux && race

package rawconn

import "syscall"

// With the race detector, reads and writes go through syscall.Read and syscall.Write: these
// tell the detector what the system call reads and writes of p, and order a write on one
// connection before the read of it on another, as for any net.Conn. A raw system call would
// hide both, and the detector would report races between goroutines that a connection
// orders. `make test` runs this package's tests without the detector too, so the raw path is
// tested as well.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) { return errno(syscall.Read(int(fd), p)) }

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) { return errno(syscall.Write(int(fd), p)) }

func errno(n int, err error) (int, syscall.Errno) {
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}
