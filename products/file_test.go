package products

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// yamlProduct is goodProduct in YAML, dates unquoted (YAML timestamps), numbers and
// booleans plain.
const yamlProduct = `
  - id: 0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10
    network: mainnet
    tokenContractAddress: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    tokenMetadata: {name: Sunrise, description: d, image: "ipfs://x", background_color: fff, attributes: [], properties: {}}
    gatedContent: [FULL_RESOLUTION_IMAGE]
    isGated: true
    totalSold: 3
    totalAvailable: 10
    prices:
      - {id: 5d1f0a4e-8c2b-4b6f-a1e2-3c4d5e6f7a8b, currency: USD, price: "200.00"}
    auctions: []
    saleType: LIMITED_EDITION
    createdAt: 2026-11-01T10:00:00Z
    liveAt: 2026-11-02T10:00:00Z
    previewAt: null
    salesEndAt: ~
    purchaseLink: https://example.com/buy/sunrise
    username: nft_creator
`

func TestParseFileForms(t *testing.T) {
	want, err := Parse([]byte(goodProduct))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, file string }{
		{"a.json", "[" + goodProduct + "]"},
		{"a.JSON", `{"products": [` + goodProduct + `]}`},
		{"a.yaml", yamlProduct},
		{"a.yml", "products:\n" + yamlProduct},
		{"-", "  [" + goodProduct + "]"},           // JSON by content
		{"catalog", "# a comment\n" + yamlProduct}, // YAML by content
		{"-", "{\"products\": [" + goodProduct + "]}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps, err := ParseFile(c.name, []byte(c.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 1 || !reflect.DeepEqual(ps[0], want) {
				g, _ := json.Marshal(ps)
				w, _ := json.Marshal(want)
				t.Errorf("parsed %s\nwant [%s]", g, w)
			}
		})
	}
}

// TestParseFileErrors: every kind of bad file, each message naming the element and field.
func TestParseFileErrors(t *testing.T) {
	second := strings.Replace(goodProduct, "0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", "1b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10", 1)
	set := func(key string, value any) string {
		return string(doc(t, map[string]any{key: value}))
	}
	list := func(docs ...string) string { return "[" + strings.Join(docs, ",") + "]" }
	for _, c := range []struct {
		name, file, data string
		want             []string
	}{
		{"bad saleType", "a.json", list(goodProduct, set("saleType", "AUCTION")),
			[]string{"products[1]: saleType: must be LIMITED_EDITION, OPEN_EDITION, OFF_CHAIN_AUCTION or ON_CHAIN_AUCTION"}},
		{"missing required field", "a.json", list(set("gatedContent", nil)), []string{"products[0]: gatedContent: required"}},
		{"null required field", "a.json", list(set("isGated", json.RawMessage("null"))), []string{"products[0]: isGated: required"}},
		{"duplicate id", "a.json", list(goodProduct, second, goodProduct),
			[]string{"products[2]: id: 0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10 is also the id of products[0]"}},
		{"duplicate id in another case", "a.json", list(goodProduct, set("id", "0B7C2C1E-5A0E-4C36-9D1F-2F4F6A3B9E10")),
			[]string{"products[1]: id: 0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10 is also the id of products[0]"}},
		{"bad date", "a.json", list(set("liveAt", "2026-13-01T00:00:00Z")), []string{`products[0]: bad date "2026-13-01T00:00:00Z"`}},
		{"date without time", "a.json", list(set("createdAt", "2026-11-01")), []string{`products[0]: bad date "2026-11-01"`}},
		{"unknown field", "a.json", list(set("colour", "red")), []string{"products[0]: colour: unknown field"}},
		{"wrong type", "a.json", list(set("totalSold", "3")), []string{"products[0]: totalSold: must be an integer"}},
		{"not an object", "a.json", list(goodProduct, "42"), []string{"products[1]: a product must be a JSON object"}},
		{"every problem listed", "a.json", list(set("saleType", "X"), goodProduct, set("id", "nope")),
			[]string{"products[0]: saleType: must be", "products[2]: id: must be a UUID"}},
		{"bad JSON", "a.json", "[\n" + goodProduct + ",\n{\"id\": }]", []string{"not valid JSON: line 21, column 9"}},
		{"trailing JSON", "a.json", list(goodProduct) + " x", []string{"not valid JSON"}},
		{"JSON object without products", "a.json", `{"items": []}`, []string{"items: unknown field"}},
		{"JSON object with more", "a.json", `{"products": [], "version": 1}`, []string{"version: unknown field"}},
		{"JSON products not a list", "a.json", `{"products": {}}`, []string{"products: must be a list of products"}},
		{"JSON scalar", "a.json", `"products"`, []string{"must hold a list of products"}},
		{"empty JSON", "a.json", "  \n", []string{"the file is empty"}},
		{"empty list", "a.json", "[]", []string{"the file holds no products"}},
		{"bad YAML", "a.yaml", "products:\n  - id: [1\n", []string{"not valid YAML"}},
		{"YAML scalar", "a.yaml", "hello", []string{"line 1: the file must hold a list of products"}},
		{"empty YAML", "a.yaml", "# nothing\n", []string{"the file is empty"}},
		{"two YAML documents", "a.yaml", yamlProduct + "---\n" + yamlProduct, []string{"not one YAML document"}},
		{"YAML bad saleType", "a.yaml", strings.Replace(yamlProduct, "LIMITED_EDITION", "EDITION", 1),
			[]string{"products[0] (line 2): saleType: must be"}},
		{"YAML missing field", "a.yaml", strings.Replace(yamlProduct, "    isGated: true\n", "", 1),
			[]string{"products[0] (line 2): isGated: required"}},
		{"YAML bad date", "a.yaml", strings.Replace(yamlProduct, "liveAt: 2026-11-02T10:00:00Z", "liveAt: 2026-11-02", 1),
			[]string{`products[0] (line 2): bad date "2026-11-02"`}},
		{"YAML duplicate id", "a.yaml", yamlProduct + yamlProduct, []string{"products[1] (line 21): id: 0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10 is also the id of products[0]"}},
		{"YAML unknown field", "a.yaml", strings.Replace(yamlProduct, "    isGated: true\n", "    isGated: true\n    colour: red\n", 1),
			[]string{"products[0] (line 2): colour: unknown field"}},
		{"YAML duplicate key", "a.yaml", strings.Replace(yamlProduct, "    isGated: true\n", "    isGated: true\n    isGated: false\n", 1),
			[]string{"products[0] (line 2): line 8: isGated: given twice"}},
		{"YAML yes is no boolean", "a.yaml", strings.Replace(yamlProduct, "isGated: true", "isGated: yes", 1),
			[]string{"products[0] (line 2): isGated: must be a boolean"}},
		{"YAML alias", "a.yaml", "- &p {id: x}\n- *p\n", []string{"products[0] (line 1): line 1: YAML anchors and aliases are not supported",
			"products[1] (line 2): line 2: YAML anchors and aliases are not supported"}},
		{"YAML non-string key", "a.yaml", "- {1: x}\n", []string{"products[0] (line 1): line 1: a key must be a string"}},
		{"YAML binary", "a.yaml", "- {id: !!binary aGk=}\n", []string{"products[0] (line 1): line 1: YAML tag !!binary is not supported"}},
		{"YAML infinite number", "a.yaml", strings.Replace(yamlProduct, "totalSold: 3", "totalSold: .inf", 1), []string{"not a finite number"}},
		{"YAML object with more", "a.yaml", "products: []\nversion: 1\n", []string{"line 1: version: unknown field"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps, err := ParseFile(c.file, []byte(c.data))
			fe, ok := err.(*FileError)
			if !ok || ps != nil {
				t.Fatalf("ParseFile = %d products, %v; want a *FileError", len(ps), err)
			}
			if len(fe.Problems) != len(c.want) {
				t.Fatalf("problems %q, want %d like %q", fe.Problems, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(fe.Problems[i], w) {
					t.Errorf("problem %d: %q, want it to contain %q", i, fe.Problems[i], w)
				}
			}
		})
	}
}

// TestExampleCatalog: the catalog shipped in examples/ parses, and covers what the
// examples of docs/products.md show: every sale type, two creators, a sold-out limited edition, an upcoming and
// an ended product, one product whose totalSold comes from the dev chain.
func TestExampleCatalog(t *testing.T) {
	raw, err := os.ReadFile("../examples/products.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ParseFile("products.yaml", raw)
	if err != nil {
		t.Fatal(err)
	}
	types, creators, networks := map[string]int{}, map[string]int{}, map[string]int{}
	var soldOut, upcoming, ended int
	for _, p := range ps {
		types[p.SaleType]++
		creators[Creator(*p.Username)]++
		if p.SaleType == LimitedEdition && p.TotalAvailable != nil && p.TotalSold >= *p.TotalAvailable {
			soldOut++
		}
		if p.LiveAt.After(testNow.AddDate(4, 0, 0)) {
			upcoming++
		}
		if p.SalesEndAt != nil && p.SalesEndAt.Before(testNow) {
			ended++
		}
		networks[p.Network]++
	}
	// One product on the dev chain (mainnet in the shipped config), to show the sold-from-
	// chain rule; the rest on a network the shipped config does not serve.
	if networks["mainnet"] != 1 || networks["ethereum"] != len(ps)-1 {
		t.Errorf("networks %v, want 1 on mainnet, the rest on ethereum", networks)
	}
	if len(types) != 4 || len(creators) != 2 || soldOut == 0 || upcoming == 0 || ended == 0 {
		t.Errorf("types %v, creators %v, sold out %d, upcoming (after 2030) %d, ended %d", types, creators, soldOut, upcoming, ended)
	}
}
