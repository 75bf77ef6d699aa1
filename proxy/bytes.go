package proxy

import "unsafe"

// b2s views b as a string without copying, for lookups that do not keep the string.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// s2b views s as bytes without copying; the bytes must not be modified.
func s2b(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
