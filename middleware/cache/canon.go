// Canonical params (what and why), and the canonical forms of single values.

package cache

import (
	"encoding/json"
	"errors"
)

// Canonical params: a cached method's params are read into their meaning and written back in
// one form, so that requests meaning the same share an entry: quantities in minimal hex
// (0x1 and 0x01), addresses, hashes and data in lowercase hex, absent optional arguments as
// their defaults (eth_call's block is "latest", eth_getLogs' range latest), eth_call's
// call object with its fields in one order and `data` as `input` (geth reads both and refuses
// them when they differ). A request the reader does not fully understand (an unknown field,
// another type, an override argument) is not cached: errCanon.
//
// The reader runs on every lookup, hits included, so it does not go through encoding/json:
// the params are validated once (gjson.ValidBytes, as strict as encoding/json's grammar) and
// then walked by the small scanner of canon_scan.go, which relies on that validity; the
// canonical form is appended to the caller's buffer. It is byte for byte what encoding/json
// wrote for the same meaning before (arrays, objects with their keys sorted, strings), so the
// Redis keys that replicas of another version share stay the same.

var errCanon = errors.New("params not canonicalizable")

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendHex appends "0x<digits>" with the digits lowercased.
func appendHex(b []byte, digits []byte) []byte {
	b = append(b, `"0x`...)
	for _, c := range digits {
		if 'A' <= c && c <= 'F' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return append(b, '"')
}

// hexDigits returns the digits of a 0x-prefixed hex string (any case); errCanon when s is
// not one or has more than maxDigits digits (0: no limit) or none (unless allowEmpty).
func hexDigits(s []byte, maxDigits int, allowEmpty bool) ([]byte, error) {
	if len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return nil, errCanon
	}
	d := s[2:]
	if (!allowEmpty && len(d) == 0) || (maxDigits > 0 && len(d) > maxDigits) {
		return nil, errCanon
	}
	for _, c := range d {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return nil, errCanon
		}
	}
	return d, nil
}

// appendQuantity appends a hex quantity of at most 256 bits in minimal form (leading zeros
// dropped).
func appendQuantity(b, raw []byte) ([]byte, error) {
	s, err := readString(raw)
	if err != nil {
		return b, err
	}
	d, err := hexDigits(s, 64, false) // geth: at most 256 bits, 64 digits
	if err != nil {
		return b, err
	}
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return appendHex(b, d), nil
}

// fixedDigits are the digits of 0x-hex of exactly n bytes (an address, a hash), any case.
func fixedDigits(raw []byte, n int) ([]byte, error) {
	s, err := readString(raw)
	if err != nil {
		return nil, err
	}
	d, err := hexDigits(s, 2*n, false)
	if err != nil || len(d) != 2*n {
		return nil, errCanon
	}
	return d, nil
}

// appendFixed appends 0x-hex of exactly n bytes, lowercase.
func appendFixed(b, raw []byte, n int) ([]byte, error) {
	d, err := fixedDigits(raw, n)
	if err != nil {
		return b, err
	}
	return appendHex(b, d), nil
}

func appendAddress(b, raw []byte) ([]byte, error) { return appendFixed(b, raw, 20) }
func appendHash(b, raw []byte) ([]byte, error)    { return appendFixed(b, raw, 32) }

// dataDigits are the digits of 0x-hex bytes (an even number of digits, possibly none).
func dataDigits(raw []byte) ([]byte, error) {
	s, err := readString(raw)
	if err != nil {
		return nil, err
	}
	d, err := hexDigits(s, 0, true)
	if err != nil || len(d)%2 != 0 {
		return nil, errCanon
	}
	return d, nil
}

func appendData(b, raw []byte) ([]byte, error) {
	d, err := dataDigits(raw)
	if err != nil {
		return b, err
	}
	return appendHex(b, d), nil
}

// readBool reads a JSON boolean; absent: def ("true" or "false"), or errCanon when def is "".
func readBool(raw []byte, def string) (bool, error) {
	s := string(raw)
	if raw == nil {
		s = def
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errCanon
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// appendString appends s as encoding/json writes a string: as it is when it holds nothing
// that it escapes, else through encoding/json.
func appendString(b, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(string(s))
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
