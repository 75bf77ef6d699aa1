package products

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/proxy"
)

// FuzzParse: Parse (the admin API's bodies, every element of a catalog file) never panics,
// and a product it accepts survives its own JSON unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodProduct))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(strings.Replace(goodProduct, `"auctions": []`, `"auctions": [{"id":"a","tokenId":"1","status":"CREATED","startsAt":"2026-01-01T00:00:00Z","endsAt":"2026-01-02T00:00:00+01:00","auctionContractId":"c"}]`, 1)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := Parse(raw)
		if err != nil {
			return
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse of its own output %s: %v", b, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the product:\n%+v\n%+v", p, q)
		}
		if _, err := p.row(); err != nil {
			t.Fatal(err)
		}
	})
}

// values is a query string as the list route reads it (proxy.RESTRequest's encodings).
type values url.Values

func (v values) Query(name string) (string, bool) {
	vs, ok := v[name]
	if !ok {
		return "", false
	}
	return vs[0], true // fasthttp's Peek: the first value
}

func (v values) QueryList(name string) []string {
	var out []string
	for _, key := range []string{name, name + "[]"} {
		for _, s := range v[key] {
			for _, item := range strings.Split(s, ",") {
				if item = strings.TrimSpace(item); item != "" {
					out = append(out, item)
				}
			}
		}
	}
	return out
}

// FuzzParseQuery: the list's parameters never panic; a query either gives a filter within
// the documented bounds or a 400.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5&offset=10", "baseUrl=https://example.com/@a&saleType=EDITION,AUCTION&sold=true",
		"liveAt=2026-11-21T13:00:00%2B01:00&includeUpcoming=true", "saleType[]=X", "baseUrl=http://[::1]:80/@", "limit=-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		fl, err := parseQuery(values(v), testNow)
		if err != nil {
			var he *proxy.HTTPError
			if !errors.As(err, &he) || he.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if fl.Limit < 1 || fl.Limit > MaxLimit || fl.Offset < 0 || len(fl.SaleTypes) > 4 || fl.Creator != strings.ToLower(fl.Creator) {
			t.Fatalf("filter out of bounds: %+v", fl)
		}
	})
}
