package hexfixed

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestDecode(t *testing.T) {
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
		if ok := Decode(dst, tc.s); ok != tc.ok {
			t.Errorf("Decode(%q) = %v, want %v", tc.s, ok, tc.ok)
			continue
		}
		if want, _ := hex.DecodeString(tc.want); tc.ok && !bytes.Equal(dst, want) {
			t.Errorf("Decode(%q) = %x, want %x", tc.s, dst, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("0x0123456789abcdefABCDEF", 11)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 64 {
			return
		}
		dst := make([]byte, n)
		ok := Decode(dst, s)
		want, err := hex.DecodeString(s[min(2, len(s)):])
		std := err == nil && len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && len(want) == n
		if ok != std || ok && !bytes.Equal(dst, want) {
			t.Fatalf("Decode(%q, %d) = %v %x; encoding/hex says %v %x", s, n, ok, dst, std, want)
		}
	})
}
