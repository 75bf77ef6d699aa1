package testengine

import "syscall"

// dieWithParent makes a started server get SIGKILL when the test process dies.
func dieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
