package products

import (
	"encoding/json"
	"strings"
	"testing"
)

const goodProduct = `{
  "id": "0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10",
  "network": "mainnet",
  "tokenContractAddress": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
  "tokenMetadata": {"name": "Sunrise", "description": "d", "image": "ipfs://x", "background_color": "fff", "attributes": [], "properties": {}},
  "gatedContent": ["FULL_RESOLUTION_IMAGE"],
  "isGated": true,
  "totalSold": 3,
  "totalAvailable": 10,
  "prices": [{"id": "5d1f0a4e-8c2b-4b6f-a1e2-3c4d5e6f7a8b", "currency": "USD", "price": "200.00"}],
  "auctions": [],
  "saleType": "LIMITED_EDITION",
  "createdAt": "2026-11-01T10:00:00Z",
  "liveAt": "2026-11-02T10:00:00Z",
  "previewAt": null,
  "salesEndAt": null,
  "purchaseLink": "https://example.com/buy/sunrise",
  "username": "nft_creator"
}`

func TestParseGood(t *testing.T) {
	p, err := Parse([]byte(goodProduct))
	if err != nil {
		t.Fatal(err)
	}
	if p.TokenContractAddress != "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" || p.TotalAvailable == nil || *p.TotalAvailable != 10 ||
		p.LiveAt == nil || p.SalesEndAt != nil || *p.Username != "nft_creator" || p.Prices[0].Price != "200.00" {
		t.Errorf("parsed = %+v", p)
	}
}

func TestParseBad(t *testing.T) {
	set := func(key string, value any) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(goodProduct), &m); err != nil {
			t.Fatal(err)
		}
		if value == nil {
			delete(m, key)
		} else {
			m[key] = value
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, c := range []struct {
		name, doc, want string
	}{
		{"not an object", `[1]`, "JSON object"},
		{"missing id", set("id", nil), "id: required"},
		{"null saleType", set("saleType", json.RawMessage("null")), "saleType: required"},
		{"missing prices", set("prices", nil), "prices: required"},
		{"bad uuid", set("id", "42"), "id: must be a UUID"},
		{"bad saleType", set("saleType", "AUCTION"), "saleType: must be"},
		{"bad date", set("createdAt", "yesterday"), "bad date"},
		{"date without zone", set("liveAt", "2026-11-02 10:00"), "bad date"},
		{"wrong type", set("totalSold", "3"), "totalSold: must be an integer"},
		{"negative sold", set("totalSold", -1), "totalSold: must not be negative"},
		{"unknown field", set("colour", "red"), "colour: unknown field"},
		{"bad address", set("tokenContractAddress", "0x12"), "tokenContractAddress"},
		{"bad checksum", set("tokenContractAddress", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"), "tokenContractAddress: mixed-case"},
		{"metadata not an object", set("tokenMetadata", "x"), "tokenMetadata"},
		{"bad price", set("prices", []any{map[string]any{"id": "5d1f0a4e-8c2b-4b6f-a1e2-3c4d5e6f7a8b", "currency": "USD", "price": "2e2"}}), "prices[0].price"},
		{"bad currency", set("prices", []any{map[string]any{"id": "5d1f0a4e-8c2b-4b6f-a1e2-3c4d5e6f7a8b", "currency": "usd", "price": "2"}}), "prices[0].currency"},
		{"bad link", set("purchaseLink", "javascript:alert(1)"), "purchaseLink"},
		{"ends before live", set("salesEndAt", "2026-11-01T00:00:00Z"), "salesEndAt: before liveAt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
