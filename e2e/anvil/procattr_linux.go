package anvil

import "syscall"

// sysProcAttr makes the kernel kill anvil when the test process dies without
// running its cleanups (a panic, a -timeout abort, SIGKILL), so no node outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
