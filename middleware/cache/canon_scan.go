// The scanner: params read as an array, and valid JSON walked without encoding/json.

package cache

import (
	"bytes"
	"encoding/json"

	"github.com/tidwall/gjson"
)

// maxArgs is the most params any cached method takes (eth_call's four).
const maxArgs = 4

// args are a call's params as read: n elements, null ones as nil (absent).
type args struct {
	n int
	v [maxArgs][]byte
}

// at is the i-th argument, nil when absent or null.
func (a *args) at(i int) []byte {
	if i < a.n {
		return a.v[i]
	}
	return nil
}

// readArgs reads params as a JSON array (absent or null: none) of at most max elements;
// null elements are read as nil (absent). Params that are not valid JSON are errCanon.
func readArgs(params []byte, max int, a *args) error {
	*a = args{}
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "null" {
		return nil
	}
	if p[0] != '[' || !gjson.ValidBytes(p) {
		return errCanon
	}
	it := newIter(p)
	for {
		_, v, ok := it.next()
		if !ok {
			return nil
		}
		if a.n == max || a.n == maxArgs {
			return errCanon
		}
		if string(v) != "null" {
			a.v[a.n] = v
		}
		a.n++
	}
}

// iter walks the elements of an array or the members of an object of valid JSON.
type iter struct {
	b   []byte
	i   int
	obj bool
}

// newIter walks raw, valid JSON starting with '[' or '{'.
func newIter(raw []byte) iter { return iter{b: raw, i: 1, obj: raw[0] == '{'} }

// next returns the next member's key (with its quotes; nil in an array) and value; false at
// the end.
func (it *iter) next() (key, val []byte, ok bool) {
	i := skipSpace(it.b, it.i)
	if it.b[i] == ',' {
		i = skipSpace(it.b, i+1)
	}
	if c := it.b[i]; c == ']' || c == '}' {
		it.i = i + 1
		return nil, nil, false
	}
	if it.obj {
		e := stringEnd(it.b, i)
		key = it.b[i:e]
		i = skipSpace(it.b, e)
		i = skipSpace(it.b, i+1) // the colon
	}
	e := valueEnd(it.b, i)
	it.i = e
	return key, it.b[i:e], true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string starting at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != ']' && b[j] != '}' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// readString decodes a JSON string (escapes included): without escapes the bytes inside the
// quotes, else a decoded copy.
func readString(raw []byte) ([]byte, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, errCanon
	}
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 {
		// No escapes: the text is the value (raw was validated as JSON).
		return body, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errCanon
	}
	return []byte(s), nil
}

// objectKey is key (a JSON string with its quotes) decoded; callers switch on string(…) of
// it, which the compiler does without a copy.
func objectKey(key []byte) []byte {
	k, _ := readString(key)
	return k
}
