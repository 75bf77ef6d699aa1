// Package rpchex reads the hex forms of JSON-RPC answers: fixed-size strings (hashes,
// addresses, topics) into caller-owned arrays without allocating, and quantities, for the
// paths that read every log and block of a chain (the owners indexer, the live feeds).
package rpchex

import (
	"fmt"
	"strconv"
)

// Fixed decodes "0x" (or "0X") and exactly 2*len(dst) hex digits into dst, and reports
// whether s was that; dst is left partly written when it was not.
func Fixed(dst []byte, s string) bool {
	if len(s) != 2+2*len(dst) || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return false
	}
	for i := range dst {
		hi, lo := nibble(s[2+2*i]), nibble(s[3+2*i])
		if hi > 15 || lo > 15 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// nibble is the value of hex digit c, or 255.
func nibble(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// Quantity reads a JSON-RPC quantity of at most 64 bits ("0x1a").
func Quantity(s string) (uint64, error) {
	if len(s) < 3 || len(s) > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return 0, fmt.Errorf("not a hex quantity: %q", s)
	}
	return strconv.ParseUint(s[2:], 16, 64)
}
