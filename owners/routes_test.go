package owners

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

func TestPageKeyRoundTrip(t *testing.T) {
	maxID := new(uint256.Int).SetAllOne()
	d := queryDigest{1, 2, 3, 4, 5, 6, 7, 0xff}
	for _, id := range []*uint256.Int{uint256.NewInt(0), uint256.NewInt(1), uint256.NewInt(256), maxID} {
		k := store.NFTBalanceKey{Contract: common.Address{0xc1, 19: 0xff}, ID: *id, Owner: common.Address{0xa1}}
		s := encodePageKey(k, d)
		if strings.ContainsAny(s, "+/=") {
			t.Errorf("page key %q is not base64url without padding", s)
		}
		back, backD, err := decodePageKey(s)
		if err != nil || back != k || backD != d {
			t.Errorf("decode(encode(%s)) = %+v, %x, %v", id.Hex(), back, backD, err)
		}
	}
}

// TestQueryDigest: the digest of a query changes with its chain, its contracts and its
// tokenId (given or not), and with nothing else.
func TestQueryDigest(t *testing.T) {
	a, b := common.Address{0xa}, common.Address{0xb}
	base := query{chainID: 1337, contracts: []common.Address{a, b}, limit: 10}
	same := []query{
		{chainID: 1337, contracts: []common.Address{a, b}, limit: 1000, withTokens: true},
	}
	other := map[string]query{
		"chain":           {chainID: 1, contracts: []common.Address{a, b}, limit: 10},
		"fewer contracts": {chainID: 1337, contracts: []common.Address{a}, limit: 10},
		"other contracts": {chainID: 1337, contracts: []common.Address{a, {0xc}}, limit: 10},
		"tokenId 0":       {chainID: 1337, contracts: []common.Address{a, b}, id: uint256.NewInt(0), limit: 10},
		"tokenId 5":       {chainID: 1337, contracts: []common.Address{a, b}, id: uint256.NewInt(5), limit: 10},
	}
	for _, q := range same {
		if q.digest() != base.digest() {
			t.Errorf("limit or nfts changed the digest: %+v", q)
		}
	}
	seen := map[queryDigest]string{base.digest(): "base"}
	for name, q := range other {
		if prev, dup := seen[q.digest()]; dup {
			t.Errorf("%s has the digest of %s", name, prev)
		}
		seen[q.digest()] = name
	}
}

func TestPageKeyRefusals(t *testing.T) {
	valid := encodePageKey(store.NFTBalanceKey{Contract: common.Address{1}, ID: *uint256.NewInt(5), Owner: common.Address{2}}, queryDigest{9})
	raw, _ := pageKeyEncoding.DecodeString(valid)
	enc := func(b []byte) string { return pageKeyEncoding.EncodeToString(b) }
	for name, s := range map[string]string{
		"not base64":       "!!!!",
		"padded":           valid + "=",
		"standard base64":  strings.NewReplacer("-", "+", "_", "/").Replace(valid) + "+",
		"too short":        enc(raw[:20]),
		"version 1":        enc(append([]byte{1}, raw[1:]...)),
		"other version":    enc(append([]byte{3}, raw[1:]...)),
		"leading zero id":  enc(append(append([]byte{}, raw[:pageKeyMin]...), 0, 5)),
		"id over 256 bits": enc(append(append([]byte{}, raw[:pageKeyMin]...), make([]byte, 33)...)),
		"very long":        strings.Repeat("A", 500),
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := decodePageKey(s); err == nil {
				t.Errorf("decodePageKey(%q) accepted", s)
			}
		})
	}
}

// FuzzPageKey: a page key from a client is decoded or refused, never a panic, and one that
// decodes is the encoding of what it decodes to (one key, one spelling).
func FuzzPageKey(f *testing.F) {
	f.Add(encodePageKey(store.NFTBalanceKey{Contract: common.Address{1}, ID: *uint256.NewInt(5), Owner: common.Address{2}}, queryDigest{9}))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		k, d, err := decodePageKey(s)
		if err != nil {
			return
		}
		if again := encodePageKey(k, d); again != s {
			t.Fatalf("decodePageKey(%q) = %+v, %x, which encodes as %q", s, k, d, again)
		}
	})
}

// failingTokens is a metadata source whose every lookup fails, with an error per token id.
type failingTokens map[uint64]error

func (f failingTokens) Token(_ context.Context, _ uint64, _ common.Address, id *big.Int, _ bool) ([]byte, error) {
	return nil, f[id.Uint64()]
}

// TestRouteScopeReadinessAndFailedMetadata: a chain whose index holds no block yet answers
// 503; a contract outside the chain's configured list answers 404; a token whose metadata
// lookup fails still answers 200, its Token object built from the index with metadataError
// saying why in a fixed phrase.
func TestRouteScopeReadinessAndFailedMetadata(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	nft := e.deploy(erc721C, "Alpha", "A")
	other := e.deploy(erc721C, "Beta", "B")
	for id := int64(1); id <= 3; id++ {
		e.transact(0, erc721C, nft, "mint", e.addrs[0], big.NewInt(id))
	}
	e.tokens = failingTokens{1: jsonrpc.ErrUpstreamTimeout, 2: proxy.Errorf(http.StatusNotFound, "token does not exist"),
		3: errors.New("store: disk I/O error")}
	get := func(api, query string) (int, string) {
		t.Helper()
		resp, err := http.Get(api + "/v1/owners?chainId=1337&" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	e.cfg.StartBlock = 1 << 40 // far ahead: nothing to index yet
	e.start()
	api := e.serve()
	if status, body := get(api, "contractAddress="+nft.Hex()); status != http.StatusServiceUnavailable ||
		!strings.Contains(body, "chain 1337: the owners index has not indexed its first blocks yet; retry shortly") {
		t.Fatalf("before the first block: HTTP %d %s", status, body)
	}
	if resp, err := http.Get(api + "/v1/owners?chainId=1337&contractAddress=" + nft.Hex()); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("before the first block: Retry-After %q, want 1", resp.Header.Get("Retry-After"))
	}
	e.stop()

	e.cfg.StartBlock, e.cfg.Contracts = 0, []string{nft.Hex()}
	e.start()
	api = e.serve()
	e.waitIndexed()
	if status, body := get(api, "contractAddresses="+nft.Hex()+","+other.Hex()); status != http.StatusNotFound ||
		!strings.Contains(body, "contract "+strings.ToLower(other.Hex())+" is not indexed on chain 1337") {
		t.Fatalf("a contract outside the list: HTTP %d %s", status, body)
	}
	status, body := get(api, "contractAddress="+nft.Hex()+"&nfts=true&fetchNftMetadata=true")
	var a struct {
		Balances []struct {
			TokenID string         `json:"tokenId"`
			Token   metadata.Token `json:"token"`
		} `json:"balances"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil || len(a.Balances) != 3 {
		t.Fatalf("HTTP %d %s", status, body)
	}
	want := map[string]string{"0x1": "upstream timeout", "0x2": "token does not exist", "0x3": "metadata lookup failed"}
	for _, b := range a.Balances {
		tok := b.Token
		if tok.MetadataError == nil || *tok.MetadataError != want[b.TokenID] || tok.ID != b.TokenID || tok.TokenType != "ERC721" ||
			tok.ContractAddress != strings.ToLower(nft.Hex()) || tok.ChainID != 1337 || tok.CoinType != 60 || tok.TokenURI != nil ||
			string(tok.RawMetadata) != "null" || tok.TimeLastUpdated == "" {
			t.Errorf("token %s = %+v, want metadataError %q", b.TokenID, tok, want[b.TokenID])
		}
	}
	if !strings.Contains(body, `"metadata":{"name":null,`) || strings.Contains(body, "disk") {
		t.Errorf("the fallback objects: %s", body)
	}
}

// TestRouteQueryRules: a pageKey serves only the query that gave it (chain, contracts,
// tokenId given or not); limit, nfts and fetchNftMetadata may change between pages. And
// nfts/fetchNftMetadata follow the REST rule for booleans: true or false in any case, empty
// as absent, anything else a 400 naming the parameter.
func TestRouteQueryRules(t *testing.T) {
	node, _ := devNode(t)
	e := newEnv(t, node, nil)
	nft := e.deploy(erc721C, "Alpha", "A")
	other := e.deploy(erc721C, "Beta", "B")
	multi := e.deploy(erc1155C, "Multi", "M", "")
	for id := int64(1); id <= 3; id++ {
		e.transact(0, erc721C, nft, "mint", e.addrs[int(id)], big.NewInt(id))
		e.transact(0, erc721C, other, "mint", e.addrs[0], big.NewInt(id))
	}
	for i := 1; i <= 3; i++ {
		e.transact(0, erc1155C, multi, "mint", e.addrs[i], big.NewInt(1), big.NewInt(int64(i)))
	}
	e.start()
	api := e.serve()
	e.waitIndexed()
	get := func(query string) (int, string, *string) {
		t.Helper()
		resp, err := http.Get(api + "/v1/owners?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var a struct {
			PageKey *string `json:"pageKey"`
		}
		_ = json.Unmarshal(b, &a)
		return resp.StatusCode, string(b), a.PageKey
	}
	keyOf := func(query string) string {
		t.Helper()
		status, body, key := get(query)
		if status != http.StatusOK || key == nil {
			t.Fatalf("%s: HTTP %d %s, want a page key", query, status, body)
		}
		return url.QueryEscape(*key)
	}
	c := "chainId=1337&contractAddress="
	oneID := keyOf(c + multi.Hex() + "&tokenId=1&limit=1") // multi id 1 has 3 holders
	whole := keyOf(c + nft.Hex() + "&limit=1")             // last row: nft token 1
	two := keyOf(c + nft.Hex() + "&contractAddress=" + other.Hex() + "&limit=1")
	firstOfTwo := nft
	if other.Cmp(nft) < 0 {
		firstOfTwo = other
	}

	t.Run("pageKey accepted", func(t *testing.T) {
		for name, query := range map[string]string{
			"same query":                         c + multi.Hex() + "&tokenId=1&limit=1&pageKey=" + oneID,
			"same query, tokenId spelled in hex": c + multi.Hex() + "&tokenId=0x01&limit=1&pageKey=" + oneID,
			"other limit":                        c + multi.Hex() + "&tokenId=1&limit=5&pageKey=" + oneID,
			"nfts and fetchNftMetadata added":    c + multi.Hex() + "&tokenId=1&nfts=true&fetchNftMetadata=true&pageKey=" + oneID,
			"same contracts in another order":    "chainId=1337&contractAddresses=" + other.Hex() + "," + nft.Hex() + "&pageKey=" + two,
		} {
			t.Run(name, func(t *testing.T) {
				if status, body, _ := get(query); status != http.StatusOK {
					t.Errorf("HTTP %d %s, want 200", status, body)
				}
			})
		}
	})
	t.Run("pageKey of another query", func(t *testing.T) {
		for name, query := range map[string]string{
			"tokenId dropped":                    c + multi.Hex() + "&limit=1&pageKey=" + oneID,
			"other tokenId":                      c + multi.Hex() + "&tokenId=2&limit=1&pageKey=" + oneID,
			"tokenId added, the key's own token": c + nft.Hex() + "&tokenId=1&limit=1&pageKey=" + whole,
			"a contract dropped":                 c + firstOfTwo.Hex() + "&limit=1&pageKey=" + two,
			"a contract added":                   c + nft.Hex() + "&contractAddress=" + multi.Hex() + "&limit=1&pageKey=" + whole,
			"other chain":                        "chainId=1&contractAddress=" + nft.Hex() + "&limit=1&pageKey=" + whole,
		} {
			t.Run(name, func(t *testing.T) {
				status, body, _ := get(query)
				if status != http.StatusBadRequest || !strings.Contains(body, `"message":"pageKey: it belongs to another query (other chainId, contracts or tokenId); start again without it"`) {
					t.Errorf("HTTP %d %s, want a 400 for a page key of another query", status, body)
				}
			})
		}
	})

	t.Run("booleans accepted", func(t *testing.T) {
		for _, q := range []string{"nfts=true", "nfts=TRUE", "nfts=True", "nfts=false", "nfts=FALSE", "nfts=",
			"nfts=true&fetchNftMetadata=tRuE", "nfts=true&fetchNftMetadata=false", "nfts=true&fetchNftMetadata="} {
			t.Run(q, func(t *testing.T) {
				if status, body, _ := get(c + nft.Hex() + "&tokenId=1&" + q); status != http.StatusOK {
					t.Errorf("HTTP %d %s, want 200", status, body)
				}
			})
		}
	})
	t.Run("booleans refused", func(t *testing.T) {
		for _, tc := range []struct{ query, param string }{
			{"nfts=1", "nfts"}, {"nfts=0", "nfts"}, {"nfts=t", "nfts"}, {"nfts=f", "nfts"}, {"nfts=yes", "nfts"},
			{"nfts=%20true", "nfts"}, {"nfts=truee", "nfts"},
			{"nfts=true&fetchNftMetadata=1", "fetchNftMetadata"}, {"nfts=true&fetchNftMetadata=T", "fetchNftMetadata"},
			{"nfts=true&fetchNftMetadata=on", "fetchNftMetadata"},
		} {
			t.Run(tc.query, func(t *testing.T) {
				status, body, _ := get(c + nft.Hex() + "&tokenId=1&" + tc.query)
				if status != http.StatusBadRequest || !strings.Contains(body, `"message":"`+tc.param+`: must be true or false"`) {
					t.Errorf("HTTP %d %s, want a 400 naming %s", status, body, tc.param)
				}
			})
		}
	})
}
