//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// children starts the processes of a run and stops every one of them at the end: each child
// leads its own process group (so a Ctrl-C in the terminal reaches only the bench, which
// then kills them), and gets SIGKILL from the kernel should the bench die without cleaning
// up (Pdeathsig).
type children struct {
	mu      sync.Mutex
	procs   []*child
	stopped int // processes stopped so far, by stop and stopAll
}

// child is one started process.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed once the process has been waited for
	err  error         // Wait's result, set before done is closed
}

// start runs bin with args; cpus, when not empty, pins it with taskset -c cpus.
func (cs *children) start(name, cpus, bin string, args ...string) (*child, error) {
	if cpus != "" {
		args = append([]string{"-c", cpus, bin}, args...)
		bin = "taskset"
	}
	c := &child{name: name, cmd: exec.Command(bin, args...), out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	c.cmd.Stdout = c.out
	c.cmd.Stderr = c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cs.procs = append(cs.procs, c)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// run runs bin to completion, pinned like start, bounded by timeout and ctx, and returns its
// output and CPU time.
func (cs *children) run(ctx context.Context, name, cpus string, timeout time.Duration, bin string, args ...string) (out []byte, cpu time.Duration, err error) {
	c, err := cs.start(name, cpus, bin, args...)
	if err != nil {
		return nil, 0, err
	}
	defer cs.forget(c)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.kill()
		return c.out.Bytes(), 0, fmt.Errorf("%s did not finish within %v", name, timeout)
	case <-ctx.Done():
		c.kill()
		return c.out.Bytes(), 0, ctx.Err()
	}
	ps := c.cmd.ProcessState
	cpu = ps.UserTime() + ps.SystemTime()
	if c.err != nil {
		return c.out.Bytes(), cpu, fmt.Errorf("%s: %w\n%s", name, c.err, indent(c.out.String()))
	}
	return c.out.Bytes(), cpu, nil
}

func (cs *children) forget(c *child) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i, p := range cs.procs {
		if p == c {
			cs.procs = append(cs.procs[:i], cs.procs[i+1:]...)
			return
		}
	}
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the child's process group and waits for the child.
func (c *child) kill() {
	if !c.exited() {
		// ESRCH means it is already gone; Wait reports how.
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-c.done
}

// stop kills one child started with start, forgets it, and checks that nothing of its
// process group is left.
func (cs *children) stop(c *child) error {
	c.kill()
	cs.forget(c)
	cs.mu.Lock()
	cs.stopped++
	cs.mu.Unlock()
	if err := syscall.Kill(-c.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: process group %d left running after SIGKILL: %v", c.name, c.cmd.Process.Pid, err)
	}
	return nil
}

// stopAll kills every child still known and then checks that none of them, nor anything in
// their process groups, is left. It returns how many it stopped.
func (cs *children) stopAll() (int, error) {
	cs.mu.Lock()
	procs := cs.procs
	cs.procs = nil
	cs.stopped += len(procs)
	cs.mu.Unlock()
	for _, c := range procs {
		c.kill()
	}
	var left []string
	for _, c := range procs {
		pid := c.cmd.Process.Pid
		// The group's leader has been reaped; a live member would still answer signal 0.
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			left = append(left, fmt.Sprintf("%s (process group %d: %v)", c.name, pid, err))
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			left = append(left, fmt.Sprintf("%s (pid %d still in /proc)", c.name, pid))
		}
	}
	if len(left) > 0 {
		return len(procs), fmt.Errorf("processes left running: %s", strings.Join(left, ", "))
	}
	return len(procs), nil
}

// cpuTime is the user+system CPU time of a running process, all threads, from
// /proc/PID/stat (clock ticks of 10 ms).
func cpuTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count after it.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * (time.Second / clockTicks), nil
}

// clockTicks is USER_HZ, the unit of /proc times: 100 on every Linux architecture Go runs on.
const clockTicks = 100

// cpuTimes are the busy and idle times of the machine (key "cpu") and of each CPU (keys
// "cpu0", "cpu1"...), from /proc/stat. Idle includes waiting for I/O; busy is the rest
// (guest time is already counted in user).
type cpuTimes map[string]struct{ busy, idle time.Duration }

func readCPUTimes() (cpuTimes, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	ct := cpuTimes{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		var t struct{ busy, idle time.Duration }
		// user nice system idle iowait irq softirq steal [guest guest_nice]
		for i, v := range f[1:min(len(f), 9)] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/stat: %w", err)
			}
			d := time.Duration(n) * (time.Second / clockTicks)
			if i == 3 || i == 4 {
				t.idle += d
			} else {
				t.busy += d
			}
		}
		ct[f[0]] = t
	}
	if _, ok := ct["cpu"]; !ok {
		return nil, errors.New("/proc/stat: no cpu line")
	}
	return ct, nil
}

// idle is the idle time of the CPUs named, or of the whole machine when cpus is empty.
func (ct cpuTimes) idle(cpus []int) time.Duration {
	if len(cpus) == 0 {
		return ct["cpu"].idle
	}
	var d time.Duration
	for _, c := range cpus {
		d += ct["cpu"+strconv.Itoa(c)].idle
	}
	return d
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort() (int, error) {
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

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

func (b *tailBuffer) String() string { return string(b.Bytes()) }

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
