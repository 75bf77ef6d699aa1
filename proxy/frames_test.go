package proxy

import (
	"bytes"
	"testing"
)

// The frame headers at the boundaries of the three length encodings (RFC 6455 5.2).
func TestAppendFrameHeader(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0x81, 0}},
		{125, []byte{0x81, 125}},
		{126, []byte{0x81, 126, 0, 126}},
		{0xffff, []byte{0x81, 126, 0xff, 0xff}},
		{0x10000, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}},
	} {
		got := appendFrameHeader(nil, tc.n)
		if !bytes.Equal(got, tc.want) || frameHeaderLen(tc.n) != len(tc.want) {
			t.Errorf("%d bytes: header % x (length %d), want % x", tc.n, got, frameHeaderLen(tc.n), tc.want)
		}
	}
}

// The pools hand out the smallest class that holds a size, and take back only their own.
func TestFrameBufClasses(t *testing.T) {
	var p frameBufs
	for _, tc := range []struct{ size, capacity int }{{1, 2 << 10}, {2 << 10, 2 << 10}, {2<<10 + 1, 8 << 10}, {200 << 10, maxFrameBuf}} {
		b := p.get(tc.size)
		if len(*b) != 0 || cap(*b) != tc.capacity {
			t.Errorf("get(%d): len %d cap %d, want 0 and %d", tc.size, len(*b), cap(*b), tc.capacity)
		}
		*b = append(*b, 'x')
		p.put(b)
	}
	var q queueArrays
	small := q.grow(nil, 3)
	if len(small) != 0 || cap(small) < 3 || cap(small) > maxSpare {
		t.Fatalf("grow(nil, 3): cap %d", cap(small))
	}
	small = append(small, outMsg{body: []byte("a")})
	big := q.grow(small, 100)
	if len(big) != 1 || cap(big) != 128 || string(big[0].body) != "a" {
		t.Fatalf("grow to 101: len %d cap %d", len(big), cap(big))
	}
}
