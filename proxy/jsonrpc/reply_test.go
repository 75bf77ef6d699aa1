package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestScanReply(t *testing.T) {
	for _, tc := range []struct {
		body            string
		ok              bool
		id, res, errObj string
		elems           int
	}{
		{body: `{"jsonrpc":"2.0","id":7,"result":"0x1"}`, ok: true, id: `7`, res: `"0x1"`},
		{body: ` {"id":1,"error":{"code":-32000,"message":"x"},"result":null} `, ok: true, id: `1`, res: `null`, errObj: `{"code":-32000,"message":"x"}`},
		{body: `{"id":1,"id":2,"result":[1,{"a":[]}]}`, ok: true, id: `2`, res: `[1,{"a":[]}]`},
		{body: `{"i\u0064":3,"result":true}`, ok: true, id: `3`, res: `true`},
		{body: `[{"id":1,"result":1},2,{"id":3,"error":{}}]`, ok: true, elems: 3},
		{body: `[]`, ok: true},
		{body: `"text"`, ok: true},
		{body: `{"id":1,"result":1}x`, ok: false},
		{body: `{"id":1,"result":}`, ok: false},
		{body: `[{"id":1},`, ok: false},
		{body: ``, ok: false},
		{body: `{"id":01}`, ok: false},
	} {
		r, elems, ok := ScanReply([]byte(tc.body), nil)
		if ok != tc.ok {
			t.Errorf("%s: ok = %v, want %v", tc.body, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if string(r.ID) != tc.id || string(r.Result) != tc.res || string(r.Error) != tc.errObj || len(elems) != tc.elems {
			t.Errorf("%s: id %q result %q error %q, %d elements", tc.body, r.ID, r.Result, r.Error, len(elems))
		}
	}
}

// FuzzScanReply checks ScanReply against encoding/json: the same validity, the same value,
// and for objects and arrays of objects the same id, result and error members (the last of
// duplicates, as encoding/json keeps into a map).
func FuzzScanReply(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"result":"0x1"}`,
		`[{"id":1,"result":1},{"id":2,"error":{"code":1,"message":"m"}}]`,
		`{"id":1,"id":2}`, `[1,"a",null,[]]`, `{"a":{"b":[1,2,{"c":"\u00e9"}]}}`, ` [ ] `, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, elems, ok := ScanReply(body, nil)
		if ok != json.Valid(body) {
			t.Fatalf("ScanReply ok = %v, json.Valid = %v: %q", ok, !ok, body)
		}
		if !ok {
			return
		}
		if !bytes.Equal(r.Raw, bytes.TrimSpace(body)) && !bytes.Equal(r.Raw, bytes.Trim(body, " \t\r\n")) {
			t.Fatalf("Raw %q of %q", r.Raw, body)
		}
		check := func(r Reply) {
			var m map[string]json.RawMessage
			if json.Unmarshal(r.Raw, &m) != nil {
				if r.IsObject() {
					t.Fatalf("an object encoding/json does not read: %q", r.Raw)
				}
				return
			}
			for key, got := range map[string][]byte{"id": r.ID, "result": r.Result, "error": r.Error} {
				if want, in := m[key]; in != (got != nil) || in && !bytes.Equal(got, want) {
					t.Fatalf("%s = %q, encoding/json %q (present %v): %q", key, got, want, in, r.Raw)
				}
			}
		}
		if r.IsObject() {
			check(r)
		}
		if r.IsArray() {
			var all []json.RawMessage
			if err := json.Unmarshal(r.Raw, &all); err != nil || len(all) != len(elems) {
				t.Fatalf("%d elements, encoding/json %d (%v): %q", len(elems), len(all), err, r.Raw)
			}
			for i, el := range elems {
				if !bytes.Equal(el.Raw, all[i]) {
					t.Fatalf("element %d = %q, encoding/json %q", i, el.Raw, all[i])
				}
				if el.IsObject() {
					check(el)
				}
			}
		}
	})
}
