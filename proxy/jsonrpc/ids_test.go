package jsonrpc

import "testing"

func TestNewID(t *testing.T) {
	a, b := NewID(), NewID()
	if !ValidID(a) || !ValidID(b) || a == b {
		t.Fatalf("NewID: %q, %q", a, b)
	}
	for _, id := range []string{"", "0x", "0x1", a[:33], a + "0", "0X" + a[2:], "0x" + "A" + a[3:], "0x" + "g" + a[3:]} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
}
