//go:build !linux

package testengine

import "syscall"

// dieWithParent: Pdeathsig is Linux's; elsewhere a server outlives a test process killed
// before its cleanup.
func dieWithParent() *syscall.SysProcAttr { return nil }
