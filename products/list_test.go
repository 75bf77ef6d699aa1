package products

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// seedCatalog imports the catalog of the filter table (testNow is 2026-11-21T12:00Z):
//
//	name creator type               sold/avail  liveAt     salesEndAt
//	A1   alice   LIMITED_EDITION    10/10       -5h                     sold out
//	A2   alice   OPEN_EDITION       99/-        -1h                     (ties A2 < B1 by id)
//	A3   alice   ON_CHAIN_AUCTION   0/1         now                     live from this instant
//	B1   bob     ON_CHAIN_AUCTION   1/10        -1h
//	B2   bob     OFF_CHAIN_AUCTION  0/1         +2h                     upcoming
//	B3   bob     LIMITED_EDITION    0/5         -9h        -3h          ended
//	B4   bob     OPEN_EDITION       5/-         +30d       +31d         upcoming
//	C1   Carol   OFF_CHAIN_AUCTION  1/1         -30d       +10d         sold out
//	C2   carol   LIMITED_EDITION    4/5         -2d        now          ended at this instant
//	N1   -       OPEN_EDITION       0/-         -          -            never scheduled
func seedCatalog(t *testing.T, e *env) {
	t.Helper()
	at := func(d time.Duration) string { return testNow.Add(d).Format(time.RFC3339) }
	null := json.RawMessage("null")
	n := 0
	p := func(name, user, saleType string, sold int, avail any, live, end any) []byte {
		n++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		u := any(null)
		if user != "" {
			u = user
		}
		return doc(t, map[string]any{"id": id, "tokenMetadata": map[string]any{"name": name}, "username": u,
			"saleType": saleType, "totalSold": sold, "totalAvailable": avail, "liveAt": live, "salesEndAt": end,
			"previewAt": null})
	}
	const h, d = time.Hour, 24 * time.Hour
	e.importDocs(
		p("A1", "alice", LimitedEdition, 10, 10, at(-5*h), null),
		p("A2", "alice", OpenEdition, 99, null, at(-h), null),
		p("B1", "bob", OnChainAuction, 1, 10, at(-h), null),
		p("A3", "alice", OnChainAuction, 0, 1, at(0), null),
		p("B2", "bob", OffChainAuction, 0, 1, at(2*h), null),
		p("B3", "bob", LimitedEdition, 0, 5, at(-9*h), at(-3*h)),
		p("B4", "bob", OpenEdition, 5, null, at(30*d), at(31*d)),
		p("C1", "Carol", OffChainAuction, 1, 1, at(-30*d), at(10*d)),
		p("C2", "carol", LimitedEdition, 4, 5, at(-2*d), at(0)),
		p("N1", "", OpenEdition, 0, null, null, null),
	)
}

// names lists the tokenMetadata names of a list answer, in order.
func names(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		Products []struct {
			TokenMetadata struct {
				Name string `json:"name"`
			} `json:"tokenMetadata"`
		} `json:"products"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Products == nil || string(v.Error) != "null" {
		t.Fatalf("not a products answer: %s", body)
	}
	var out []string
	for _, p := range v.Products {
		out = append(out, p.TokenMetadata.Name)
	}
	return strings.Join(out, ",")
}

func TestListFilters(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	seedCatalog(t, e)
	for _, c := range []struct {
		name, query, want string
	}{
		{"live, newest first, ties by id", "", "A3,A2,B1,A1,C1"},
		{"unknown and empty parameters are ignored", "?foo=bar&sold=&limit=&saleType=&baseUrl=", "A3,A2,B1,A1,C1"},
		{"a repeated parameter counts its first value", "?limit=1&limit=3&sold=false&sold=true", "A3"},
		{"includeUpcoming", "?includeUpcoming=true", "B4,B2,A3,A2,B1,A1,C1"},
		{"includeUpcoming=false", "?includeUpcoming=false", "A3,A2,B1,A1,C1"},

		{"baseUrl @ segment", "?baseUrl=https://example.com/@alice", "A3,A2,A1"},
		{"baseUrl @ segment, case and path after it", "?baseUrl=" + url.QueryEscape("https://shop.example/@CAROL/drops/x?ref=1#top"), "C1"},
		{"baseUrl last segment", "?baseUrl=https://example.com/creators/Bob/", "B1"},
		{"baseUrl of nobody", "?baseUrl=http://example.com/nobody", ""},
		{"baseUrl with upcoming", "?baseUrl=https://example.com/@bob&includeUpcoming=true", "B4,B2,B1"},

		{"saleType one", "?saleType=LIMITED_EDITION", "A1"},
		{"saleType EDITION", "?saleType=EDITION", "A2,A1"},
		{"saleType AUCTION", "?saleType=AUCTION", "A3,B1,C1"},
		{"saleType comma list", "?saleType=OFF_CHAIN_AUCTION,ON_CHAIN_AUCTION", "A3,B1,C1"},
		{"saleType repeated", "?saleType=OPEN_EDITION&saleType=OFF_CHAIN_AUCTION", "A2,C1"},
		{"saleType brackets", "?saleType[]=OPEN_EDITION&saleType[]=ON_CHAIN_AUCTION", "A3,A2,B1"},
		{"saleType umbrella and member", "?saleType=EDITION,LIMITED_EDITION", "A2,A1"},
		{"saleType both umbrellas", "?saleType=EDITION,AUCTION", "A3,A2,B1,A1,C1"},

		{"sold", "?sold=true", "A1,C1"},
		{"not sold", "?sold=false", "A3,A2,B1"},
		{"sold with upcoming", "?sold=false&includeUpcoming=true", "B4,B2,A3,A2,B1"},
		{"booleans in any case", "?sold=FALSE&includeUpcoming=True", "B4,B2,A3,A2,B1"},
		{"booleans in any case, sold", "?sold=tRUE", "A1,C1"},
		{"includeUpcoming=FALSE", "?includeUpcoming=FALSE", "A3,A2,B1,A1,C1"},

		{"liveAt 3h ago: C2 still live, B3 just ended", "?liveAt=2026-11-21T09:00:00Z", "A1,C2,C1"},
		{"liveAt 6h ago: B3 live", "?liveAt=2026-11-21T06:00:00Z", "B3,C2,C1"},
		{"liveAt with an offset, + encoded", "?liveAt=2026-11-21T13:00:00%2B01:00", "A3,A2,B1,A1,C1"},
		{"liveAt just before now: A3 not yet", "?liveAt=2026-11-21T11:59:59.999Z", "A2,B1,A1,C2,C1"},
		{"liveAt and upcoming", "?liveAt=2026-11-21T06:00:00Z&includeUpcoming=true", "B4,B2,A3,A2,B1,A1,B3,C2,C1"},

		{"limit", "?limit=2", "A3,A2"},
		{"limit and offset", "?limit=2&offset=2", "B1,A1"},
		{"last page", "?limit=2&offset=4", "C1"},
		{"offset past the end", "?offset=5", ""},
		{"limit 100", "?limit=100", "A3,A2,B1,A1,C1"},
		{"offset 0", "?offset=0&limit=1", "A3"},

		{"creator, umbrella and sold", "?baseUrl=https://example.com/@alice&saleType=EDITION&sold=false", "A2"},
		{"creator, type and upcoming", "?baseUrl=https://example.com/@bob&saleType=AUCTION&includeUpcoming=true", "B2,B1"},
		{"creator and one type", "?baseUrl=https://example.com/@alice&saleType=ON_CHAIN_AUCTION", "A3"},
		{"type and sold", "?saleType=AUCTION&sold=true", "C1"},
		{"type, sold and paging", "?saleType=EDITION,AUCTION&sold=false&limit=1&offset=1", "A2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, h, body := e.get(e.api + "/v1/products" + c.query)
			if status != http.StatusOK || h.Get("Content-Type") != "application/json" {
				t.Fatalf("HTTP %d %s: %s", status, h.Get("Content-Type"), body)
			}
			if got := names(t, body); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestListBadParameters(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	seedCatalog(t, e)
	for _, c := range []struct {
		query, want string
	}{
		{"baseUrl=notaurl", "baseUrl: must be an absolute http(s) URL"},
		{"baseUrl=" + url.QueryEscape("ftp://example.com/@alice"), "baseUrl: must be an absolute http(s) URL"},
		{"baseUrl=" + url.QueryEscape("/@alice"), "baseUrl: must be an absolute http(s) URL"},
		{"baseUrl=" + url.QueryEscape("https://exa mple.com/@alice"), "baseUrl: must be an absolute http(s) URL"},
		{"baseUrl=https://example.com", "baseUrl: the URL has no path segment naming a creator"},
		{"baseUrl=https://example.com//", "baseUrl: the URL has no path segment naming a creator"},
		{"baseUrl=https://example.com/@", "baseUrl: the @ segment names no creator"},
		{"saleType=auction", `saleType: "auction" is not one of`},
		{"saleType=EDITION,FOO", `saleType: "FOO" is not one of`},
		{"saleType[]=SOLD", `saleType: "SOLD" is not one of`},
		{"sold=1", "sold: must be true or false"},
		{"sold=0", "sold: must be true or false"},
		{"sold=t", "sold: must be true or false"},
		{"sold=yes", "sold: must be true or false"},
		{"sold=%20true", "sold: must be true or false"},
		{"includeUpcoming=maybe", "includeUpcoming: must be true or false"},
		{"includeUpcoming=1", "includeUpcoming: must be true or false"},
		{"includeUpcoming=T", "includeUpcoming: must be true or false"},
		{"liveAt=yesterday", "liveAt: must be an RFC 3339 time"},
		{"liveAt=2026-11-21", "liveAt: must be an RFC 3339 time"},
		{"liveAt=2026-11-21T13:00:00+01:00", "a + in an offset is written %2B"},
		{"limit=0", "limit: must be an integer from 1 to 100"},
		{"limit=101", "limit: must be an integer from 1 to 100"},
		{"limit=-1", "limit: must be an integer from 1 to 100"},
		{"limit=abc", "limit: must be an integer from 1 to 100"},
		{"limit=1.5", "limit: must be an integer from 1 to 100"},
		{"offset=-1", "offset: must be an integer from 0 to 2147483647"},
		{"offset=x", "offset: must be an integer from 0 to 2147483647"},
		{"offset=99999999999", "offset: must be an integer from 0 to 2147483647"},
	} {
		t.Run(c.query, func(t *testing.T) {
			status, h, body := e.get(e.api + "/v1/products?" + c.query)
			if status != http.StatusBadRequest {
				t.Fatalf("HTTP %d: %s", status, body)
			}
			re := restError(t, body)
			if re.Code != 400 || re.Status != "Bad Request" || re.Request == "" || re.Request != h.Get("X-Request-Id") ||
				!strings.Contains(re.Message, c.want) {
				t.Errorf("error %+v, want a 400 containing %q", re, c.want)
			}
		})
	}
}

// TestListAnswer: the answer's shape, each product exactly as imported (times in UTC, UUIDs
// in lowercase), and the routing around it.
func TestListAnswer(t *testing.T) {
	e := newEnv(t, Config{}, Deps{})
	in := doc(t, map[string]any{"id": "0B7C2C1E-5A0E-4C36-9D1F-2F4F6A3B9E10", "liveAt": "2026-11-02T12:00:00+02:00",
		"salesEndAt": "2027-01-01T00:00:00.5Z", "previewAt": "2026-11-01T00:00:00Z",
		"auctions": []any{map[string]any{"id": "a1", "tokenId": "0x1", "status": "CREATED", "startsAt": "2026-12-01T00:00:00-05:00",
			"endsAt": "2026-12-02T00:00:00Z", "auctionContractId": "c1"}}})
	e.importDocs(in)
	status, _, body := e.get(e.api + "/v1/products")
	if status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", status, body)
	}
	want := `{"products":[{"id":"0b7c2c1e-5a0e-4c36-9d1f-2f4f6a3b9e10","network":"mainnet",
		"tokenContractAddress":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
		"tokenMetadata":{"name":"Sunrise","description":"d","image":"ipfs://x","background_color":"fff","attributes":[],"properties":{}},
		"gatedContent":["FULL_RESOLUTION_IMAGE"],"isGated":true,"totalSold":3,"totalAvailable":10,
		"prices":[{"id":"5d1f0a4e-8c2b-4b6f-a1e2-3c4d5e6f7a8b","currency":"USD","price":"200.00"}],
		"auctions":[{"id":"a1","tokenId":"0x1","status":"CREATED","startsAt":"2026-12-01T05:00:00Z","endsAt":"2026-12-02T00:00:00Z","auctionContractId":"c1"}],
		"saleType":"LIMITED_EDITION","createdAt":"2026-11-01T10:00:00Z","liveAt":"2026-11-02T10:00:00Z",
		"previewAt":"2026-11-01T00:00:00Z","salesEndAt":"2027-01-01T00:00:00.5Z",
		"purchaseLink":"https://example.com/buy/sunrise","username":"nft_creator"}],"error":null}`
	if !jsonEqual(t, want, body) {
		t.Errorf("answer\n%s\nwant\n%s", body, want)
	}

	// An empty list is an empty array, not null.
	if _, _, body := e.get(e.api + "/v1/products?baseUrl=https://example.com/@nobody"); string(body) != `{"products":[],"error":null}` {
		t.Errorf("empty answer %s", body)
	}
	// The route takes GET only.
	status, h, body := e.do(http.MethodPost, e.api+"/v1/products", strings.NewReader("{}"), nil)
	if status != http.StatusMethodNotAllowed || !strings.Contains(h.Get("Allow"), "GET") {
		t.Errorf("POST: HTTP %d Allow %q: %s", status, h.Get("Allow"), body)
	}
}

func jsonEqual(t *testing.T, want string, got []byte) bool {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return false
	}
	wb, _ := json.Marshal(w)
	gb, _ := json.Marshal(g)
	return string(wb) == string(gb)
}

// TestCreatorOf: the creator a baseUrl names.
func TestCreatorOf(t *testing.T) {
	for raw, want := range map[string]string{
		"https://example.com/@nft_creator":              "nft_creator",
		"https://example.com/@NFT_Creator/":             "nft_creator",
		"https://example.com/u/@alice/collections/2024": "alice",
		"https://example.com/creators/bob":              "bob",
		"https://example.com/creators/bob/":             "bob",
		"http://example.com:8080/a/b/Carol?x=1#y":       "carol",
		"https://example.com/@al%20ice":                 "al ice",
	} {
		if got, err := CreatorOf(raw); err != nil || got != want {
			t.Errorf("CreatorOf(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

// TestSoldFromChain: with the index scope covering a product's network (and contract), its
// totalSold is the contract's tokens minted on chain, in the answer and in the sold filter;
// other products keep their stored figure.
func TestSoldFromChain(t *testing.T) {
	const (
		indexed    = "0x00000000000000000000000000000000000000aa"
		notListed  = "0x00000000000000000000000000000000000000bb"
		polyListed = "0x00000000000000000000000000000000000000cc"
	)
	e := newEnv(t, Config{}, Deps{
		Networks: map[string]uint64{"mainnet": 1337, "dev": 1337, "polygon": 137, "base": 8453},
		Scope:    IndexScope{Chains: map[uint64][]string{1337: nil, 137: {"0x00000000000000000000000000000000000000CC"}}},
	})
	null := json.RawMessage("null")
	n := 0
	p := func(name, network, contract string, sold int, avail any) []byte {
		n++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		return doc(t, map[string]any{"id": id, "tokenMetadata": map[string]any{"name": name, "totalSold": 77},
			"network": network, "tokenContractAddress": contract, "totalSold": sold, "totalAvailable": avail,
			"liveAt": "2026-11-01T00:00:00Z", "username": name})
	}
	e.importDocs(
		p("mainnet-minted", "mainnet", indexed, 1, 5),     // chain says 5 of 5: sold out
		p("dev-minted", "dev", indexed, 9, 9),             // same chain and contract under another name
		p("mainnet-no-mints", "mainnet", notListed, 4, 4), // no nft_minted row: 0
		p("polygon-listed", "polygon", polyListed, 0, 2),  // listed contract: 2 of 2
		p("polygon-other", "polygon", indexed, 3, 3),      // not listed on polygon: stored 3 of 3
		p("base-unindexed", "base", indexed, 1, null),     // chain not in scope: stored
	)
	e.exec(`INSERT INTO nft_minted (chain_id, contract, minted) VALUES (1337, ?, 5), (137, ?, 2), (137, ?, 40), (8453, ?, 50)`,
		indexed, polyListed, indexed, indexed)

	sold := func(query string) map[string]int64 {
		t.Helper()
		status, _, body := e.get(e.api + "/v1/products" + query)
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", status, body)
		}
		var v struct {
			Products []struct {
				TotalSold     int64 `json:"totalSold"`
				TokenMetadata struct {
					Name      string `json:"name"`
					TotalSold int64  `json:"totalSold"`
				} `json:"tokenMetadata"`
			} `json:"products"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		out := map[string]int64{}
		for _, p := range v.Products {
			out[p.TokenMetadata.Name] = p.TotalSold
			if p.TokenMetadata.TotalSold != 77 {
				t.Errorf("%s: tokenMetadata.totalSold changed to %d", p.TokenMetadata.Name, p.TokenMetadata.TotalSold)
			}
		}
		return out
	}
	all := sold("")
	want := map[string]int64{"mainnet-minted": 5, "dev-minted": 5, "mainnet-no-mints": 0, "polygon-listed": 2, "polygon-other": 3, "base-unindexed": 1}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Errorf("totalSold %v, want %v", all, want)
	}
	if got := sold("?sold=true"); fmt.Sprint(got) != fmt.Sprint(map[string]int64{"mainnet-minted": 5, "polygon-listed": 2, "polygon-other": 3}) {
		t.Errorf("sold=true: %v", got)
	}
	if got := sold("?sold=false"); fmt.Sprint(got) != fmt.Sprint(map[string]int64{"dev-minted": 5, "mainnet-no-mints": 0, "base-unindexed": 1}) {
		t.Errorf("sold=false: %v", got)
	}
	// The indexer's next mints move the figure at once.
	e.exec(`UPDATE nft_minted SET minted = 9 WHERE chain_id = 1337 AND contract = ?`, indexed)
	if got := sold("?sold=true&baseUrl=https://example.com/@dev-minted"); got["dev-minted"] != 9 {
		t.Errorf("after more mints: %v", got)
	}
}

func TestAppendWithSold(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"tokenMetadata":{"totalSold":1},"totalSold":12,"totalAvailable":null}`, `{"tokenMetadata":{"totalSold":1},"totalSold":7,"totalAvailable":null}`},
		{`{"totalSold":0}`, `{"totalSold":7}`},
	} {
		got, err := appendWithSold([]byte("x"), []byte(c.body), 7)
		if err != nil || string(got) != "x"+c.want {
			t.Errorf("appendWithSold(%s) = %s, %v", c.body, got, err)
		}
	}
	for _, bad := range []string{`{"id":"x"}`, `{"totalSold":null}`} {
		if _, err := appendWithSold(nil, []byte(bad), 7); err == nil {
			t.Errorf("appendWithSold(%s): no error", bad)
		}
	}
}
