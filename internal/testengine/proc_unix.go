//go:build unix

package testengine

import "syscall"

// The signals of Freeze and Thaw, and kill(2).
const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

func kill(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
