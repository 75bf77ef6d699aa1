//go:build !linux

package anvil

import "syscall"

// sysProcAttr returns nil: only Linux can tie anvil's lifetime to the test process.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}
