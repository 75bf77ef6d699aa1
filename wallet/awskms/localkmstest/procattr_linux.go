package localkmstest

import "syscall"

// dieWithParent makes local-kms get SIGKILL when the test process dies before its cleanup.
func dieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
