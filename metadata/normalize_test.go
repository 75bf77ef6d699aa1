package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

const emptyToken = `{"name":null,"description":null,"image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`

func TestNormalizeToken(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty", `{}`, emptyToken},
		{"snake_case", `{
			"name": "Punk #1", "description": "A punk", "image": "ipfs://bafy/1.png",
			"animation_url": "ipfs://bafy/1.mp4", "external_url": "https://example.com/1",
			"background_color": "ffffff",
			"attributes": [
				{"trait_type": "Hat", "value": "Cap"},
				{"trait_type": "Level", "value": 5, "display_type": "number"},
				{"value": "untyped"},
				{"trait_type": "Valueless"}
			],
			"properties": {"files": [{"uri": "x"}]}
		}`, `{
			"name": "Punk #1", "description": "A punk", "image": "ipfs://bafy/1.png",
			"animationUrl": "ipfs://bafy/1.mp4", "externalUrl": "https://example.com/1",
			"backgroundColor": "ffffff",
			"attributes": [
				{"traitType": "Hat", "value": "Cap"},
				{"traitType": "Level", "value": 5, "displayType": "number"},
				{"traitType": null, "value": "untyped"},
				{"traitType": "Valueless", "value": null}
			],
			"properties": {"files": [{"uri": "x"}]}
		}`},
		{"camelCase", `{
			"name": "N", "imageUrl": "https://img/1", "animationUrl": "https://anim/1",
			"externalUrl": "https://ext/1", "backgroundColor": "#000",
			"attributes": [{"traitType": "Eyes", "value": "Blue", "displayType": "string"}]
		}`, `{
			"name": "N", "description": null, "image": "https://img/1", "animationUrl": "https://anim/1",
			"externalUrl": "https://ext/1", "backgroundColor": "#000",
			"attributes": [{"traitType": "Eyes", "value": "Blue", "displayType": "string"}],
			"properties": {}
		}`},
		{"image_url", `{"image_url":"a"}`, `{"name":null,"description":null,"image":"a","animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
		{"imageURI", `{"imageURI":"a"}`, `{"name":null,"description":null,"image":"a","animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
		{"image wins over image_url", `{"image_url":"b","image":"a"}`, `{"name":null,"description":null,"image":"a","animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
		{"null image falls back", `{"image":null,"image_url":"b"}`, `{"name":null,"description":null,"image":"b","animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
		{"key case", `{"Name":"n","Description":"d"}`, `{"name":"n","description":"d","image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
		{"numbers and bools for strings", `{"name":42,"description":true,"image":1.5e3,"background_color":false}`,
			`{"name":"42","description":"true","image":"1.5e3","animationUrl":null,"externalUrl":null,"backgroundColor":"false","attributes":[],"properties":{}}`},
		{"objects and arrays for strings", `{"name":{"en":"x"},"description":["x"],"image":null}`, emptyToken},
		{"attributes map", `{"attributes":{"Hat":"Cap","Level":5,"Rare":true,"Nested":{"a":1}}}`,
			`{"name":null,"description":null,"image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,
			"attributes":[{"traitType":"Hat","value":"Cap"},{"traitType":"Level","value":5},{"traitType":"Rare","value":true},{"traitType":"Nested","value":{"a":1}}],"properties":{}}`},
		{"traits", `{"traits":[{"trait_type":"Hat","value":"Cap"}]}`,
			`{"name":null,"description":null,"image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[{"traitType":"Hat","value":"Cap"}],"properties":{}}`},
		{"attributes win over traits", `{"traits":[{"trait_type":"T","value":1}],"attributes":[{"trait_type":"A","value":2}]}`,
			`{"name":null,"description":null,"image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[{"traitType":"A","value":2}],"properties":{}}`},
		{"attributes not a list", `{"attributes":"Hat: Cap","traits":null}`, emptyToken},
		{"odd attribute items", `{"attributes":[null,["x"],"Rare",7,{"trait_type":{"x":1},"value":[1,2]}]}`,
			`{"name":null,"description":null,"image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,
			"attributes":[{"traitType":null,"value":"Rare"},{"traitType":null,"value":7},{"traitType":null,"value":[1,2]}],"properties":{}}`},
		{"properties not an object", `{"properties":[1]}`, emptyToken},
		{"unicode and escapes", `{"name":"Ñandú \ud83e\udda4 \"#1\"","description":"line\nbreak"}`,
			`{"name":"Ñandú 🦤 \"#1\"","description":"line\nbreak","image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
		{"byte order mark", "\xef\xbb\xbf{\"name\":\"bom\"}", `{"name":"bom","description":null,"image":null,"animationUrl":null,"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) { normalizesTo(t, NormalizeToken, tc.doc, tc.want) })
	}
}

// normalizesTo checks that normalize reads doc into the JSON want.
func normalizesTo[T any](t *testing.T, normalize func([]byte) (T, error), doc, want string) {
	t.Helper()
	m, err := normalize([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, want)
}

func TestNormalizeTokenNotAnObject(t *testing.T) {
	for _, doc := range []string{``, `[]`, `"x"`, `null`, `42`, `{`, `{"a":1}{}`, `<html></html>`} {
		t.Run(doc, func(t *testing.T) {
			var fe *FetchError
			if _, err := NormalizeToken([]byte(doc)); !errors.As(err, &fe) || fe.Reason != "not a JSON document" {
				t.Errorf("NormalizeToken(%q) = %v", doc, err)
			}
			if _, err := NormalizeContract([]byte(doc)); !errors.As(err, &fe) || fe.Reason != "not a JSON document" {
				t.Errorf("NormalizeContract(%q) = %v", doc, err)
			}
		})
	}
}

func TestTokenMetadataJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    TokenMetadata
	}{
		{"zero", TokenMetadata{}},
		{"empty", EmptyTokenMetadata()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, got, emptyToken)
			got, err = json.Marshal(&tc.m)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, got, emptyToken)
		})
	}
	t.Run("round trip", func(t *testing.T) {
		m, err := NormalizeToken([]byte(`{"name":"n","attributes":[{"trait_type":"t","value":1,"display_type":"number"}],"properties":{"a":[1]}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back TokenMetadata
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, again) {
			t.Errorf("round trip changed %s into %s", b, again)
		}
	})
}

const emptyContract = `{"name":null,"description":null,"image":null,"external_link":null,"seller_fee_basis_points":null,"fee_recipient":null}`

func TestNormalizeContract(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty", `{}`, emptyContract},
		{"snake_case", `{"name":"C","description":"D","image":"ipfs://bafy/c.png","external_link":"https://c.example",
			"seller_fee_basis_points":250,"fee_recipient":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}`,
			`{"name":"C","description":"D","image":"ipfs://bafy/c.png","external_link":"https://c.example",
			"seller_fee_basis_points":250,"fee_recipient":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"}`},
		{"camelCase", `{"name":"C","imageUrl":"i","externalLink":"https://c.example","sellerFeeBasisPoints":"500","feeRecipient":"0X5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED"}`,
			`{"name":"C","description":null,"image":"i","external_link":"https://c.example","seller_fee_basis_points":500,"fee_recipient":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"}`},
		{"external_url", `{"external_url":"https://c.example"}`,
			`{"name":null,"description":null,"image":null,"external_link":"https://c.example","seller_fee_basis_points":null,"fee_recipient":null}`},
		{"integral float", `{"seller_fee_basis_points":1e3}`,
			`{"name":null,"description":null,"image":null,"external_link":null,"seller_fee_basis_points":1000,"fee_recipient":null}`},
		{"zero fee", `{"seller_fee_basis_points":"0"}`,
			`{"name":null,"description":null,"image":null,"external_link":null,"seller_fee_basis_points":0,"fee_recipient":null}`},
		{"fractional fee", `{"seller_fee_basis_points":2.5}`, emptyContract},
		{"negative fee", `{"seller_fee_basis_points":-1}`, emptyContract},
		{"fee over 100%", `{"seller_fee_basis_points":10001}`, emptyContract},
		{"fee not a number", `{"seller_fee_basis_points":"2.5%"}`, emptyContract},
		{"fee NaN", `{"seller_fee_basis_points":"NaN"}`, emptyContract},
		{"fee object", `{"seller_fee_basis_points":{"bps":1}}`, emptyContract},
		{"recipient bad checksum", `{"fee_recipient":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"}`, emptyContract},
		{"recipient short", `{"fee_recipient":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea"}`, emptyContract},
		{"recipient no 0x", `{"fee_recipient":"5aaeb6053f3e94c9b9a09f33669435e7ef1beaed00"}`, emptyContract},
		{"recipient ENS", `{"fee_recipient":"vitalik.eth"}`, emptyContract},
		{"recipient number", `{"fee_recipient":123}`, emptyContract},
	} {
		t.Run(tc.name, func(t *testing.T) { normalizesTo(t, NormalizeContract, tc.doc, tc.want) })
	}
}

func FuzzNormalizeToken(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"name":"n","image_url":"i","attributes":[{"trait_type":"t","value":1}],"properties":{"a":1}}`,
		`{"attributes":{"k":"v"},"traits":[1,null,[2]]}`,
		`{"name":1e999,"description":-0,"attributes":[{"value":{"a":[{}]}}]}`,
		`{"Name":"a","NAME":"b","name":{"x":[]}}`,
		`{"properties":[],"attributes":"x"}`,
		"\xef\xbb\xbf {\"name\":\"\xff\xfe\"}",
		`[1]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, err := NormalizeToken(doc)
		if err != nil {
			return
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var out struct {
			Attributes []json.RawMessage `json:"attributes"`
			Properties map[string]any    `json:"properties"`
		}
		if err := json.Unmarshal(b, &out); err != nil || out.Attributes == nil || out.Properties == nil {
			t.Fatalf("normalized %s into %s (%v)", doc, b, err)
		}
		if _, err := NormalizeContract(doc); err != nil {
			t.Fatalf("NormalizeContract failed on a document NormalizeToken took: %v", err)
		}
	})
}
