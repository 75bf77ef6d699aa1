//go:build linux

// (w)'s process readings and settings: CPU, interrupt and RSS figures, the file limit, CPU pinning.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// wsSnapshot reads the CPU time of the server, of this process, of interrupts and of the
// machine.
func wsSnapshot(pid int) (server, self, irq time.Duration, ct cpuTimes, err error) {
	if server, err = cpuTime(pid); err != nil {
		return 0, 0, 0, nil, err
	}
	if self, err = cpuTime(os.Getpid()); err != nil {
		return 0, 0, 0, nil, err
	}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if irq, err = parseIRQTime(raw); err != nil {
		return 0, 0, 0, nil, err
	}
	ct, err = readCPUTimes()
	return server, self, irq, ct, err
}

// parseIRQTime is the machine's irq + softirq time from /proc/stat: the sixth and seventh
// numbers of the "cpu" line (user nice system idle iowait irq softirq ...), in clock ticks.
func parseIRQTime(stat []byte) (time.Duration, error) {
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var ticks int64
	for _, v := range f[6:8] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}

// settledRSS reads pid's RSS every 250 ms until two readings a second apart differ by less
// than 1 MiB, or 15 s pass (then the last reading).
func settledRSS(ctx context.Context, pid int) (int64, error) {
	var last []int64
	for deadline := time.Now().Add(15 * time.Second); ; {
		v, err := processRSS(pid)
		if err != nil {
			return 0, err
		}
		last = append(last, v)
		if n := len(last); n > 4 && abs64(last[n-1]-last[n-5]) < 1<<20 || time.Now().After(deadline) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// processRSS is the resident set of pid in bytes (VmRSS of /proc/PID/status).
func processRSS(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseVmRSS(raw)
}

// parseVmRSS reads the VmRSS line of a /proc/PID/status: "VmRSS:	  123456 kB".
func parseVmRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("no VmRSS line (a kernel thread, or the process has exited)")
}

// raiseFileLimit raises this process's soft RLIMIT_NOFILE to its hard limit, and checks that
// it is at least need. Children started from now on inherit it (Go restores the original
// soft limit for children only when the program never set it itself).
func raiseFileLimit(need int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Max < uint64(need) {
		return fmt.Errorf("(w) needs %d open files in this process and in each server; the hard limit (ulimit -Hn) is %d", need, l.Max)
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// pinSelf pins every thread of this process to cpus (threads started later inherit it) and
// returns the function that undoes it: (w)'s subscribers run in this process, on the load's
// CPUs like wrk, while the servers run on theirs.
func pinSelf(cpus []int) (restore func(), err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	apply := func(s *unix.CPUSet) error {
		// Twice: a thread started during the first pass by an unpinned one is caught by the second.
		for range 2 {
			tasks, err := os.ReadDir("/proc/self/task")
			if err != nil {
				return err
			}
			for _, t := range tasks {
				tid, err := strconv.Atoi(t.Name())
				if err != nil {
					continue
				}
				if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("sched_setaffinity of thread %d: %w", tid, err)
				}
			}
		}
		return nil
	}
	if err := apply(&set); err != nil {
		return nil, err
	}
	return func() { _ = apply(&old) }, nil
}
