//go:build !linux

package localkmstest

import "syscall"

// dieWithParent: Pdeathsig is Linux's; elsewhere a test process killed before its cleanup
// leaves local-kms running.
func dieWithParent() *syscall.SysProcAttr { return nil }
