package feeds

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestHeaderForm: the header is the block object without the five members geth's newHeads
// leaves out, the others as sent, in the node's order.
func TestHeaderForm(t *testing.T) {
	const in = `{"number":"0x1b4", "hash":"0x` + h64 + `","transactions":["0x` + h64 + `"],"parentHash":"0x` + h64 +
		`","uncles":[],"size":"0x220","totalDifficulty":"0x0","logsBloom":"0x` + zeros512 + `","withdrawals":[],"extra":{"a":[1,2]},"withdrawalsRoot":"0x` + h64 + `"}`
	b, err := parseBlock([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"number":"0x1b4","hash":"0x` + h64 + `","parentHash":"0x` + h64 + `","logsBloom":"0x` + zeros512 + `","extra":{"a":[1,2]},"withdrawalsRoot":"0x` + h64 + `"}`
	if string(b.Header) != want {
		t.Fatalf("header\n%s\nwant\n%s", b.Header, want)
	}
	if b.Number != 0x1b4 || !b.bloomEmpty {
		t.Fatalf("number %d, bloomEmpty %v", b.Number, b.bloomEmpty)
	}
	for _, bad := range []string{`[]`, `{"number":"0x1"}`, `{"number":"1","hash":"0x` + h64 + `","parentHash":"0x` + h64 + `"}`, `{`} {
		if _, err := parseBlock([]byte(bad)); err == nil {
			t.Errorf("parseBlock(%s) accepted", bad)
		}
	}
	if b, err := parseBlock([]byte(`null`)); b != nil || err != nil {
		t.Errorf("parseBlock(null) = %v, %v", b, err)
	}
}

// TestRemovedFlag: "removed" is set where the node put it, or added last.
func TestRemovedFlag(t *testing.T) {
	for _, tc := range []struct{ in, false_, true_ string }{
		{`{"a":1,"removed":false,"b":2}`, `{"a":1,"removed":false,"b":2}`, `{"a":1,"removed":true,"b":2}`},
		{`{"a":1, "b" : [2]}`, `{"a":1,"b":[2],"removed":false}`, `{"a":1,"b":[2],"removed":true}`},
		{`{"removed":true}`, `{"removed":false}`, `{"removed":true}`},
		{`{}`, `{"removed":false}`, `{"removed":true}`},
	} {
		obj := gjson.Parse(tc.in)
		if got := string(appendWithRemoved(nil, obj, false)); got != tc.false_ {
			t.Errorf("%s with removed false: %s, want %s", tc.in, got, tc.false_)
		}
		if got := string(appendWithRemoved(nil, obj, true)); got != tc.true_ {
			t.Errorf("%s with removed true: %s, want %s", tc.in, got, tc.true_)
		}
	}
}

const (
	h64      = "1111111111111111111111111111111111111111111111111111111111111111"
	zeros512 = "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000" +
		"00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000" +
		"00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000" +
		"00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
)
