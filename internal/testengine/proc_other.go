//go:build !unix

package testengine

import (
	"errors"
	"syscall"
)

// The private servers run on Unix only: without kill(2), Freeze, Thaw and the check that a
// server runs fail.
const (
	sigStop = syscall.Signal(-1)
	sigCont = syscall.Signal(-2)
)

func kill(int, syscall.Signal) error { return errors.ErrUnsupported }
