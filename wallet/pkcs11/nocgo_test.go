//go:build !cgo

package pkcs11

import (
	"strings"
	"testing"
)

func TestNoCgo(t *testing.T) {
	_, err := New(Config{Module: "/usr/lib/softhsm/libsofthsm2.so", TokenLabel: "t"}, nil)
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=1 go build") {
		t.Fatalf("New without cgo: %v", err)
	}
}
