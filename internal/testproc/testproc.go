// Package testproc holds what tests and the benchmark need to run servers and child
// processes beside them: a loopback port that is free, and an output buffer safe for the
// goroutines that copy a process's output while a test reads it.
package testproc

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreePort returns a port of 127.0.0.1 that was free a moment ago, for a program that takes
// no port 0. Another process may take it before the program binds it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

// FreeAddr is FreePort as host:port; a failure fails t.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// Buffer is a bytes.Buffer safe for concurrent writers and readers (a process's stdout and
// stderr, a logger's sink).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// RSS is the resident set of process pid (0: this process), in bytes, read from
// /proc/PID/status (Linux); a failure fails t.
func RSS(t testing.TB, pid int) int64 {
	t.Helper()
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in " + path)
	return 0
}
