// Package rawconn wraps TCP connections so that their reads and writes skip the Go runtime's
// system-call bookkeeping.
//
// A net.TCPConn's Read and Write go through syscall.Read and syscall.Write, which enter and
// leave the runtime's system-call state, as a call that may block must. A socket of the
// net package never blocks: it is non-blocking, and a read or write that would block
// returns EAGAIN and waits in the network poller. Entering the system-call state has a cost
// beyond its own: when every P of the process was idle, the monitor thread (sysmon) sleeps,
// and the first system call after the idle spell wakes it. A server that answers one request
// at a time goes idle between every two of them, so each request would wake sysmon, which
// then takes the CPU from the request every 20 µs until the process is idle again (what that
// costs: docs/performance.md, "Notes from the code", internal/rawconn).
//
// On Linux, Conn runs the same read(2) and write(2) as raw system calls inside the
// connection's syscall.RawConn, so the deadlines, the poller's waiting and Close work as
// for any net.Conn. (Built with the race detector it calls syscall.Read and syscall.Write
// instead: see sys_race.go.) A raw system call cannot be preempted, so each copies at most
// maxChunk bytes: a garbage collection waiting to stop the world waits for one chunk at most.
//
// On other systems (rawconn_other.go) Wrap returns the connection unchanged: their system
// calls go through the C library (macOS) or are not read(2) and write(2) (Windows), and the
// net package's own Read and Write serve there.
package rawconn
