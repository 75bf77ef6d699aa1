package jsonrpc

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID is a new random identifier of a subscription or a filter, of the form geth gives
// them (rpc.NewID): "0x" and 32 lowercase hex digits, 16 random bytes.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "0x" + hex.EncodeToString(b[:])
}

// ValidID reports whether id has the form of NewID's identifiers: any other string names no
// subscription or filter.
func ValidID(id string) bool {
	if len(id) != 34 || id[:2] != "0x" {
		return false
	}
	for i := 2; i < len(id); i++ {
		if !('0' <= id[i] && id[i] <= '9' || 'a' <= id[i] && id[i] <= 'f') {
			return false
		}
	}
	return true
}
