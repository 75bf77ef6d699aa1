package rpchex

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestFixed(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		ok   bool
		want string // hex of the result when ok
	}{
		{"0x00ff", 2, true, "00ff"},
		{"0XAbCd", 2, true, "abcd"},
		{"0x", 0, true, ""},
		{"0x00f", 2, false, ""},    // short
		{"0x00fff0", 2, false, ""}, // long
		{"00ff", 1, false, ""},     // no prefix, though of the right length
		{"1x00ff", 2, false, ""},
		{"0x0g", 1, false, ""},
	} {
		dst := make([]byte, tc.n)
		if ok := Fixed(dst, tc.s); ok != tc.ok {
			t.Errorf("Fixed(%q) = %v, want %v", tc.s, ok, tc.ok)
			continue
		}
		if want, _ := hex.DecodeString(tc.want); tc.ok && !bytes.Equal(dst, want) {
			t.Errorf("Fixed(%q) = %x, want %x", tc.s, dst, want)
		}
	}
}

func FuzzFixed(f *testing.F) {
	f.Add("0x0123456789abcdefABCDEF", 11)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 64 {
			return
		}
		dst := make([]byte, n)
		ok := Fixed(dst, s)
		want, err := hex.DecodeString(s[min(2, len(s)):])
		std := err == nil && len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && len(want) == n
		if ok != std || ok && !bytes.Equal(dst, want) {
			t.Fatalf("Fixed(%q, %d) = %v %x; encoding/hex says %v %x", s, n, ok, dst, std, want)
		}
	})
}

func TestQuantity(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want uint64
		ok   bool
	}{
		{"0x0", 0, true},
		{"0x1a", 26, true},
		{"0XFFFFFFFFFFFFFFFF", 1<<64 - 1, true},
		{"0x", 0, false},
		{"1a", 0, false},
		{"0x1ffffffffffffffff", 0, false}, // 65 bits
		{"0xg", 0, false},
	} {
		got, err := Quantity(tc.s)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Quantity(%q) = %d, %v", tc.s, got, err)
		}
	}
}
