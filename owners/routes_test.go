package owners

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
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
	for _, id := range []*uint256.Int{uint256.NewInt(0), uint256.NewInt(1), uint256.NewInt(256), maxID} {
		k := store.NFTBalanceKey{Contract: common.Address{0xc1, 19: 0xff}, ID: *id, Owner: common.Address{0xa1}}
		s := encodePageKey(k)
		if strings.ContainsAny(s, "+/=") {
			t.Errorf("page key %q is not base64url without padding", s)
		}
		back, err := decodePageKey(s)
		if err != nil || back != k {
			t.Errorf("decode(encode(%s)) = %+v, %v", id.Hex(), back, err)
		}
	}
}

func TestPageKeyRefusals(t *testing.T) {
	valid := encodePageKey(store.NFTBalanceKey{Contract: common.Address{1}, ID: *uint256.NewInt(5), Owner: common.Address{2}})
	raw, _ := pageKeyEncoding.DecodeString(valid)
	enc := func(b []byte) string { return pageKeyEncoding.EncodeToString(b) }
	for name, s := range map[string]string{
		"not base64":       "!!!!",
		"padded":           valid + "=",
		"standard base64":  strings.NewReplacer("-", "+", "_", "/").Replace(valid) + "+",
		"too short":        enc(raw[:20]),
		"other version":    enc(append([]byte{2}, raw[1:]...)),
		"leading zero id":  enc(append(append([]byte{}, raw[:pageKeyMin]...), 0, 5)),
		"id over 256 bits": enc(append(append([]byte{}, raw[:pageKeyMin]...), make([]byte, 33)...)),
		"very long":        strings.Repeat("A", 500),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodePageKey(s); err == nil {
				t.Errorf("decodePageKey(%q) accepted", s)
			}
		})
	}
}

// FuzzPageKey: a page key from a client is decoded or refused, never a panic, and one that
// decodes is the encoding of what it decodes to (one key, one spelling).
func FuzzPageKey(f *testing.F) {
	f.Add(encodePageKey(store.NFTBalanceKey{Contract: common.Address{1}, ID: *uint256.NewInt(5), Owner: common.Address{2}}))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := decodePageKey(s)
		if err != nil {
			return
		}
		if again := encodePageKey(k); again != s {
			t.Fatalf("decodePageKey(%q) = %+v, which encodes as %q", s, k, again)
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
