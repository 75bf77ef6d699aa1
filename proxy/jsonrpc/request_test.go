package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseEchoesIDsByteForByte(t *testing.T) {
	for _, id := range []string{`1`, `0`, `-7`, `1.0`, `1e3`, `18446744073709551616`, `"abc"`, `"a\u0041\n"`, `""`, `null`, `"ünï"`} {
		t.Run(id, func(t *testing.T) {
			body := []byte(`{"jsonrpc":"2.0","method":"eth_chainId","id": ` + id + ` }`)
			msg, err := Parse(body, 10)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := msg.Requests[0].ID; !bytes.Equal(got, []byte(id)) {
				t.Fatalf("id %s, want %s", got, id)
			}
			out := AppendResponse(nil, msg.Requests[0].ID, []byte(`"0x1"`), nil)
			want := `{"jsonrpc":"2.0","id":` + id + `,"result":"0x1"}`
			if string(out) != want {
				t.Fatalf("response %s, want %s", out, want)
			}
		})
	}
}

// Every answer echoes the id: an id over MaxIDBytes of JSON text is refused, and not echoed
// (the answer has id null), whatever else is wrong with its request.
func TestParseCapsIDLength(t *testing.T) {
	fits := `"` + strings.Repeat("a", MaxIDBytes-2) + `"`
	for _, tc := range []struct {
		name, id, rest string
		want           string // the error message, "" for none
	}{
		{"string at the limit", fits, `"method":"m"`, ""},
		{"number at the limit", strings.Repeat("7", MaxIDBytes), `"method":"m"`, ""},
		{"escapes count as sent", `"` + strings.Repeat(`\u0041`, (MaxIDBytes-2)/6) + `"`, `"method":"m"`, ""},
		{"string over the limit", `"` + strings.Repeat("a", MaxIDBytes-1) + `"`, `"method":"m"`, "id too long: its JSON text exceeds 128 bytes"},
		{"number over the limit", strings.Repeat("7", MaxIDBytes+1), `"method":"m"`, "id too long: its JSON text exceeds 128 bytes"},
		{"5 MB", `"` + strings.Repeat("x", 5<<20) + `"`, `"method":"m"`, "id too long: its JSON text exceeds 128 bytes"},
		{"over the limit, no method", `"` + strings.Repeat("a", 200) + `"`, `"params":[]`, "id too long: its JSON text exceeds 128 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(`{"jsonrpc":"2.0","id":` + tc.id + `,` + tc.rest + `}`)
			msg, err := Parse(body, 10)
			r := msg.Requests[0]
			if tc.want == "" {
				if err != nil || string(r.ID) != tc.id {
					t.Fatalf("error %v, id %.40s…", err, r.ID)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidRequest) || err.Message != tc.want || string(r.ID) != "null" {
				t.Fatalf("error %v, id %.40s…; want %q with id null", err, r.ID, tc.want)
			}
			out := AppendResponse(nil, r.ID, nil, err)
			if len(out) > 200 {
				t.Fatalf("answer of %d bytes: %.80s…", len(out), out)
			}
		})
	}
	// In a batch, the element with the long id alone is invalid.
	msg, err := Parse([]byte(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":"`+strings.Repeat("b", 300)+`","method":"b"}]`), 10)
	if err != nil {
		t.Fatal(err)
	}
	if r := msg.Requests[0]; r.Invalid != nil || string(r.ID) != "1" {
		t.Errorf("element 0: %+v", r)
	}
	if r := msg.Requests[1]; r.Invalid == nil || r.Invalid.Message != "id too long: its JSON text exceeds 128 bytes" || string(r.ID) != "null" {
		t.Errorf("element 1: %v, id %.40s", r.Invalid, r.ID)
	}
}

func TestParseWholeBodyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       *Error
		msg        string
	}{
		{"empty", ``, ErrParse, "parse error"},
		{"truncated", `{"jsonrpc":"2.0"`, ErrParse, "parse error"},
		{"trailing", `{} {}`, ErrParse, "parse error"},
		{"number", `1`, ErrInvalidRequest, "request must be an object or an array"},
		{"null", `null`, ErrInvalidRequest, "request must be an object or an array"},
		{"empty batch", `[]`, ErrInvalidRequest, "empty batch"},
		{"big batch", `[{},{},{}]`, ErrInvalidRequest, "batch exceeds the limit of 2 requests"},
		{"no version", `{"id":1,"method":"m"}`, ErrInvalidRequest, `jsonrpc must be "2.0"`},
		{"method object", `{"jsonrpc":"2.0","id":1,"method":{}}`, ErrInvalidRequest, "method must be a string"},
		{"params number", `{"jsonrpc":"2.0","id":1,"method":"m","params":1}`, ErrInvalidRequest, "params must be an array"},
		{"params object", `{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`, ErrInvalidParams, "params must be an array"},
		{"id bool", `{"jsonrpc":"2.0","id":false,"method":"m"}`, ErrInvalidRequest, "id must be a string, a number or null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), 2)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.want) || err.Message != tc.msg {
				t.Fatalf("error %d %q, want %d %q", err.Code, err.Message, tc.want.Code, tc.msg)
			}
		})
	}
}

func TestParseBatchMarksInvalidElements(t *testing.T) {
	msg, err := Parse([]byte(`[1,{"jsonrpc":"2.0","id":2,"method":"a","params":[1,{"x":[]}]},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","method":""}]`), 10)
	if err != nil {
		t.Fatal(err)
	}
	if !msg.Batch || len(msg.Requests) != 4 {
		t.Fatalf("batch %v with %d requests", msg.Batch, len(msg.Requests))
	}
	r := msg.Requests
	if r[0].Invalid == nil || string(r[0].ID) != "null" {
		t.Errorf("element 0: %+v", r[0])
	}
	if r[1].Invalid != nil || r[1].Method != "a" || string(r[1].Params) != `[1,{"x":[]}]` || string(r[1].ID) != "2" {
		t.Errorf("element 1: %+v", r[1])
	}
	if r[2].Invalid != nil || !r[2].Notification() {
		t.Errorf("element 2: %+v", r[2])
	}
	if r[3].Invalid == nil || string(r[3].ID) != `"x"` {
		t.Errorf("element 3: %+v", r[3])
	}
}

func TestErrorIsSentinel(t *testing.T) {
	e := ErrInvalidParams.With("nonce must be omitted")
	if !errors.Is(e, ErrInvalidParams) || errors.Is(e, ErrInvalidRequest) {
		t.Fatal("errors.Is does not follow the sentinel")
	}
	if !errors.Is(e.WithData("x"), ErrInvalidParams) {
		t.Fatal("WithData loses the sentinel")
	}
	if ErrInvalidParams.Message != "invalid params" {
		t.Fatal("With changed the sentinel")
	}
}

func TestAppendErrorEscapes(t *testing.T) {
	got := string(AppendError(nil, &Error{Code: 3, Message: "execution reverted: \"x\"\n<b>"}))
	want := `{"code":3,"message":"execution reverted: \"x\"\n\u003cb\u003e"}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	got = string(AppendError(nil, FromUpstream(3, "execution reverted", []byte(`"0x08c379a0"`))))
	if want := `{"code":3,"message":"execution reverted","data":"0x08c379a0"}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`,
		`[]`, `[1]`, `{"id":{}}`, `{"jsonrpc":"2.0","id":"\u00e9","method":"\u0065th_x"}`, ``, `nul`,
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxIDBytes) + `","method":"m"}`,
		`[{"jsonrpc":"2.0","id":` + strings.Repeat("9", MaxIDBytes+1) + `,"method":"m"},{"jsonrpc":"2.0","id":1,"method":"m"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, err := Parse(body, 8)
		if err != nil {
			if err.Code == 0 || err.Message == "" {
				t.Fatalf("error without code or message: %+v", err)
			}
			return
		}
		if len(msg.Requests) == 0 || len(msg.Requests) > 8 {
			t.Fatalf("%d requests", len(msg.Requests))
		}
		for _, r := range msg.Requests {
			if r.Invalid == nil && r.Method == "" {
				t.Fatal("valid request without a method")
			}
			if len(r.ID) > MaxIDBytes {
				t.Fatalf("id of %d bytes kept", len(r.ID))
			}
			out := AppendResponse(nil, r.ID, r.Params, r.Invalid)
			if !validJSON(out) {
				t.Fatalf("response is not JSON: %s", out)
			}
		}
	})
}

// FuzzParseMatchesReference checks the one-pass parser against the parser it replaced
// (gjson's validation and tree walks) and its validation against encoding/json's.
func FuzzParseMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`,
		`[]`, `[1]`, `{"id":{}}`, `{"jsonrpc":"2.0","id":"\u00e9","method":"\u0065th_x"}`, ``, `nul`,
		` [ {"jsonrpc" : "2\u002e0", "id" : -0.5e+3 , "method":"m","params":[{"a":[[],{}]},"x\"",true,false,null]} , 7 , "s" ] `,
		`{"jsonrpc":"2.0","id":1,"method":"m","method":"n","id":2,"params":null}`,
		`{"\u006aSonrpc":"2.0","jsonrpc":"2.0","\u0069d":01}`, `[[[[[]]]]]`, `{"a":{"b":[1,2,{"c":null}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m"} x`, `[{},{},{},{},{},{},{},{},{},{}]`, `{"a":1,}`, `[1,]`, "\"\x01\"",
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxIDBytes-2) + `","method":"m"}`,
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", MaxIDBytes-1) + `","method":"m"}`,
		`[{"id":` + strings.Repeat("9", MaxIDBytes+1) + `},{"jsonrpc":"2.0","id":"` + strings.Repeat("\\n", 70) + `","method":"m"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotErr := Parse(body, 8)
		want, wantErr := parseReference(body, 8)
		if (gotErr == ErrParse) != !json.Valid(body) {
			t.Fatalf("Parse error %v, encoding/json valid %v", gotErr, json.Valid(body))
		}
		if !sameError(gotErr, wantErr) {
			t.Fatalf("error %+v, reference %+v", gotErr, wantErr)
		}
		if gotErr == ErrParse {
			return
		}
		if got.Batch != want.Batch || len(got.Requests) != len(want.Requests) {
			t.Fatalf("batch %v with %d requests, reference %v with %d", got.Batch, len(got.Requests), want.Batch, len(want.Requests))
		}
		for i := range got.Requests {
			g, w := got.Requests[i], want.Requests[i]
			if !bytes.Equal(g.ID, w.ID) || (g.ID == nil) != (w.ID == nil) || g.Method != w.Method ||
				!bytes.Equal(g.Params, w.Params) || (g.Params == nil) != (w.Params == nil) || !sameError(g.Invalid, w.Invalid) {
				t.Fatalf("request %d: %+v, reference %+v", i, g, w)
			}
		}
	})
}

func sameError(a, b *Error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Code == b.Code && a.Message == b.Message
}

func TestParseDeepNestingWithoutRecursion(t *testing.T) {
	const depth = 1 << 20
	params := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	msg, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":`+params+`}`), 1)
	if err != nil || len(msg.Requests[0].Params) != 2*depth {
		t.Fatalf("deep params: %v", err)
	}
	if _, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":`+params[:2*depth-1]+`}`), 1); err != ErrParse {
		t.Fatalf("unbalanced deep params: %v", err)
	}
}

func TestParseSingleAllocatesNothing(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}`)
	var m Message
	if n := testing.AllocsPerRun(100, func() {
		if err := ParseInto(&m, body, 10); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if m.Requests[0].Method != "eth_getBalance" || string(m.Requests[0].Params) != `["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]` {
		t.Fatalf("parsed %+v", m.Requests[0])
	}
}

func BenchmarkParse(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}`)
	b.Run("one-pass", func(b *testing.B) {
		var m Message
		for b.Loop() {
			ParseInto(&m, body, 100)
		}
	})
	b.Run("gjson", func(b *testing.B) {
		for b.Loop() {
			parseReference(body, 100)
		}
	})
}
