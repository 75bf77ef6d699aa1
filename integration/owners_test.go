package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
)

// getOwners GETs /v1/owners with the raw query and returns the status, the X-Indexed-Block
// header and the body.
func getOwners(t *testing.T, api, rawQuery string) (int, string, string) {
	t.Helper()
	status, h, body := getH(t, api+"/v1/owners?"+rawQuery)
	return status, h.Get("X-Indexed-Block"), body
}

// ownersAnswer is the body of a 200 answer.
type ownersAnswer struct {
	Balances []struct {
		Address, Amount, ContractAddress, TokenID, TokenType string
		CoinType                                             int
		ChainID                                              uint64
		Token                                                *struct {
			ID            string          `json:"id"`
			TokenType     string          `json:"tokenType"`
			Metadata      json.RawMessage `json:"metadata"`
			MetadataError *string         `json:"metadataError"`
		} `json:"token"`
	} `json:"balances"`
	PageKey *string `json:"pageKey"`
	Error   any     `json:"error"`
}

// TestOwnersRoute: GET /v1/owners through the whole server on the embedded dev chain, for
// tokens minted, moved and burned through the gateway: every parameter form, pagination,
// token metadata, every error.
func TestOwnersRoute(t *testing.T) {
	cfg := deploymentConfig(t)
	cfg = strings.Replace(cfg, "pollInterval: 500ms", "pollInterval: 20ms", 1)
	if !strings.Contains(cfg, "pollInterval: 20ms") {
		t.Fatal("config.yaml changed: the owners poll interval was not set")
	}
	ts := startServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := gatewaySession(t, ts.API, 7)
	accounts, err := devchain.DevAccounts(10)
	if err != nil {
		t.Fatal(err)
	}
	me, a8, a9 := crypto.PubkeyToAddress(s.Key.PublicKey), accounts[8].Address, accounts[9].Address
	erc721, erc1155, onChainC := contracts.MustLoad("TestERC721"), contracts.MustLoad("TestERC1155"), contracts.MustLoad("OnChainERC721")
	deploy := func(c *contracts.Contract, args ...any) common.Address {
		addr, err := s.Deploy(ctx, c, args...)
		if err != nil {
			t.Fatalf("deploy %s: %v", c.Name, err)
		}
		return addr
	}
	var last uint64
	transact := func(to common.Address, c *contracts.Contract, method string, args ...any) {
		r, err := s.Transact(ctx, to, c, method, args...)
		if err != nil {
			t.Fatalf("%s.%s: %v", c.Name, method, err)
		}
		last = r.BlockNumber.Uint64()
	}
	nft := deploy(erc721, "Alpha", "A")
	for id := int64(1); id <= 5; id++ {
		transact(nft, erc721, "mint", me, big.NewInt(id))
	}
	transact(nft, erc721, "transferFrom", me, a8, big.NewInt(2))
	transact(nft, erc721, "burn", big.NewInt(5))
	transact(nft, erc721, "setTokenURI", big.NewInt(3), "http://127.0.0.1:1/3.json") // a document the fetcher refuses
	multi := deploy(erc1155, "Multi", "M", "")
	transact(multi, erc1155, "mintBatch", me, []*big.Int{big.NewInt(1), big.NewInt(255)}, []*big.Int{big.NewInt(10), big.NewInt(7)})
	transact(multi, erc1155, "safeTransferFrom", me, a9, big.NewInt(1), big.NewInt(4), []byte{})
	transact(multi, erc1155, "safeTransferFrom", me, a8, big.NewInt(1), big.NewInt(6), []byte{}) // me's id 1 goes to zero
	onChain := deploy(onChainC)
	transact(onChain, onChainC, "mint", a9, big.NewInt(7))

	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	// Wait for the index to hold the last block.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, block, _ := getOwners(t, ts.API, "chainId=1337&contractAddress="+lower(nft))
		if n, err := strconv.ParseUint(block, 10, 64); status == http.StatusOK && err == nil && n >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index did not reach block %d: HTTP %d, X-Indexed-Block %q", last, status, block)
		}
	}

	balance := func(owner, amount string, contract common.Address, id, typ string) string {
		return fmt.Sprintf(`{"address":%q,"amount":%q,"coinType":60,"chainId":1337,"contractAddress":%q,"tokenId":%q,"tokenType":%q}`,
			owner, amount, lower(contract), id, typ)
	}
	body := func(pageKey string, balances ...string) string {
		return `{"balances":[` + strings.Join(balances, ",") + `],"pageKey":` + pageKey + `,"error":null}`
	}
	nft2 := balance(lower(a8), "1", nft, "0x2", "ERC721")
	nft3 := balance(lower(me), "1", nft, "0x3", "ERC721")
	multi1 := []string{balance(lower(a9), "4", multi, "0x1", "ERC1155"), balance(lower(a8), "6", multi, "0x1", "ERC1155")}
	slices.SortFunc(multi1, func(x, y string) int { return strings.Compare(x, y) }) // owners in address order
	nftAll := []string{balance(lower(me), "1", nft, "0x1", "ERC721"), nft2, nft3, balance(lower(me), "1", nft, "0x4", "ERC721")}
	multiAll := append(slices.Clone(multi1), balance(lower(me), "7", multi, "0xff", "ERC1155"))
	both := append(slices.Clone(nftAll), multiAll...)
	if nft.Cmp(multi) > 0 {
		both = append(slices.Clone(multiAll), nftAll...)
	}
	c1337 := "chainId=1337&"
	for _, c := range []struct {
		name, query string
		status      int
		want        string
	}{
		{"singular, decimal id", c1337 + "contractAddress=" + lower(nft) + "&tokenId=2", 200, body("null", nft2)},
		{"hex id with leading zeros", c1337 + "contractAddress=" + lower(nft) + "&tokenId=0x0002", 200, body("null", nft2)},
		{"EIP-55 address", c1337 + "contractAddress=" + nft.Hex() + "&tokenId=3", 200, body("null", nft3)},
		{"upper-case address", c1337 + "contractAddress=0x" + strings.ToUpper(lower(nft)[2:]) + "&tokenId=3", 200, body("null", nft3)},
		{"ERC1155 id, its holders", c1337 + "contractAddresses=" + lower(multi) + "&tokenId=1", 200, body("null", multi1...)},
		{"a whole contract", c1337 + "contractAddresses=" + lower(nft), 200, body("null", nftAll...)},
		{"repeated keys", c1337 + "contractAddresses=" + lower(nft) + "&contractAddresses=" + lower(multi), 200, body("null", both...)},
		{"comma list", c1337 + "contractAddresses=" + lower(multi) + "," + lower(nft), 200, body("null", both...)},
		{"bracket keys", c1337 + "contractAddresses[]=" + lower(nft) + "&contractAddresses[]=" + lower(multi), 200, body("null", both...)},
		{"bracket keys, escaped", c1337 + "contractAddresses%5B%5D=" + lower(nft) + "&contractAddresses%5B%5D=" + lower(multi), 200, body("null", both...)},
		{"plural and singular together, a contract twice", c1337 + "contractAddresses=" + lower(nft) + "&contractAddress=" + nft.Hex() + "&contractAddress=" + lower(multi), 200, body("null", both...)},
		{"burned token", c1337 + "contractAddress=" + lower(nft) + "&tokenId=5", 200, body("null")},
		{"never minted", c1337 + "contractAddress=" + lower(nft) + "&tokenId=99", 200, body("null")},
		{"an ERC20 or any other contract: no balances", c1337 + "contractAddress=0x000000000000000000000000000000000000dEaD", 200, body("null")},
		{"limit 1 gives a page key", c1337 + "contractAddress=" + lower(nft) + "&limit=1", 200, body(`"*"`, nftAll[0])},
		{"nfts=true alone adds nothing", c1337 + "contractAddress=" + lower(nft) + "&tokenId=2&nfts=true", 200, body("null", nft2)},

		{"no contract", c1337, 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"contractAddresses: at least one contract address is required (contractAddresses or contractAddress)"}}`},
		{"empty contract", c1337 + "contractAddresses=", 400, `*`},
		{"bad address", c1337 + "contractAddress=0x12", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"contractAddresses: \"0x12\": must be a 0x-prefixed 20-byte hex address"}}`},
		{"bad checksum", c1337 + "contractAddresses=" + lower(nft) + ",0x" + flipCase(nft.Hex()[2:]), 400,
			`{"error":{"code":400,"status":"Bad Request","request":"*","message":"contractAddresses: \"0x` + flipCase(nft.Hex()[2:]) + `\": mixed-case address with an invalid EIP-55 checksum"}}`},
		{"too many contracts", c1337 + "contractAddresses=" + strings.Repeat(lower(nft)+",", 100) + lower(multi), 400, `*`},
		{"bad token id", c1337 + "contractAddress=" + lower(nft) + "&tokenId=abc", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"tokenId: must be a decimal or 0x-hex integer"}}`},
		{"empty token id", c1337 + "contractAddress=" + lower(nft) + "&tokenId=", 400, `*`},
		{"token id over 256 bits", c1337 + "contractAddress=" + lower(nft) + "&tokenId=0x1" + strings.Repeat("0", 64), 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"tokenId: must be at most 2^256-1"}}`},
		{"limit 0", c1337 + "contractAddress=" + lower(nft) + "&limit=0", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"limit: must be an integer from 1 to 1000"}}`},
		{"limit over 1000", c1337 + "contractAddress=" + lower(nft) + "&limit=1001", 400, `*`},
		{"limit not a number", c1337 + "contractAddress=" + lower(nft) + "&limit=ten", 400, `*`},
		{"negative limit", c1337 + "contractAddress=" + lower(nft) + "&limit=-5", 400, `*`},
		{"bad page key", c1337 + "contractAddress=" + lower(nft) + "&pageKey=nope!", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"pageKey: not a page key of this route (pass pageKey as a previous answer gave it)"}}`},
		{"bad nfts", c1337 + "contractAddress=" + lower(nft) + "&nfts=yes", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"nfts: must be true or false"}}`},
		{"fetchNftMetadata without nfts", c1337 + "contractAddress=" + lower(nft) + "&fetchNftMetadata=true", 400, `*`},
		{"bad chain id", "chainId=dev&contractAddress=" + lower(nft), 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"chainId: must be a positive decimal EIP-155 chain id"}}`},
		{"chain id 0", "chainId=0&contractAddress=" + lower(nft), 400, `*`},
		{"chain 1 by default, not indexed", "contractAddress=" + lower(nft), 404, `{"error":{"code":404,"status":"Not Found","request":"*","message":"chain 1 is not indexed: the owners index covers chains 1337"}}`},
		{"chain 137 not indexed", "chainId=137&contractAddress=" + lower(nft), 404, `*`},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, block, got := getOwners(t, ts.API, c.query)
			if status != c.status {
				t.Fatalf("HTTP %d, want %d: %s", status, c.status, got)
			}
			if n, err := strconv.ParseUint(block, 10, 64); status == 200 && (err != nil || n < last) {
				t.Errorf("X-Indexed-Block = %q, want a block >= %d", block, last)
			}
			if err := matchJSON(c.want, []byte(got)); c.want != "*" && err != nil {
				t.Errorf("%v\n%s", err, got)
			}
		})
	}

	t.Run("pagination walk", func(t *testing.T) {
		q := c1337 + "contractAddresses=" + lower(nft) + "," + lower(multi)
		for _, limit := range []int{1, 2, 3, 7} {
			var walked []string
			pageKey, pages := "", 0
			for {
				query := q + "&limit=" + strconv.Itoa(limit)
				if pageKey != "" {
					query += "&pageKey=" + url.QueryEscape(pageKey)
				}
				status, _, raw := getOwners(t, ts.API, query)
				var a ownersAnswer
				if status != 200 || json.Unmarshal([]byte(raw), &a) != nil {
					t.Fatalf("limit %d, page %d: HTTP %d %s", limit, pages, status, raw)
				}
				pages++
				if len(a.Balances) > limit || (a.PageKey != nil && len(a.Balances) != limit) {
					t.Fatalf("limit %d: a page of %d with page key %v", limit, len(a.Balances), a.PageKey)
				}
				for _, b := range a.Balances {
					walked = append(walked, balance(b.Address, b.Amount, common.HexToAddress(b.ContractAddress), b.TokenID, b.TokenType))
				}
				if a.PageKey == nil {
					break
				}
				pageKey = *a.PageKey
			}
			if !slices.Equal(walked, both) {
				t.Errorf("limit %d: walked %d pages:\n%s\nwant\n%s", limit, pages, strings.Join(walked, "\n"), strings.Join(both, "\n"))
			}
		}
		// A page key of one query does not serve another.
		_, _, raw := getOwners(t, ts.API, q+"&limit=1")
		var a ownersAnswer
		if err := json.Unmarshal([]byte(raw), &a); err != nil || a.PageKey == nil {
			t.Fatalf("no page key: %s", raw)
		}
		status, _, got := getOwners(t, ts.API, c1337+"contractAddress="+lower(onChain)+"&pageKey="+*a.PageKey)
		if status != 400 || !strings.Contains(got, "pageKey: it belongs to another query") {
			t.Errorf("a page key of another query: HTTP %d %s", status, got)
		}
	})

	t.Run("token metadata", func(t *testing.T) {
		status, _, raw := getOwners(t, ts.API, c1337+"contractAddresses="+lower(onChain)+","+lower(nft)+"&nfts=true&fetchNftMetadata=true")
		var a ownersAnswer
		if status != 200 || json.Unmarshal([]byte(raw), &a) != nil || len(a.Balances) != 5 {
			t.Fatalf("HTTP %d %s", status, raw)
		}
		for _, b := range a.Balances {
			switch {
			case b.Token == nil:
				t.Errorf("balance %s/%s without token", b.ContractAddress, b.TokenID)
			case b.Token.ID != b.TokenID || b.Token.TokenType != b.TokenType:
				t.Errorf("token %+v of balance %s/%s", b.Token, b.ContractAddress, b.TokenID)
			case b.ContractAddress == lower(onChain):
				if !strings.Contains(string(b.Token.Metadata), `"name":"OnChain #7"`) || b.Token.MetadataError != nil {
					t.Errorf("on-chain token: %s", raw)
				}
			case b.TokenID == "0x3":
				// Its document is refused: still 200, the reason in metadataError.
				if b.Token.MetadataError == nil || *b.Token.MetadataError != "destination address not allowed" {
					t.Errorf("token 3 metadataError = %v", b.Token.MetadataError)
				}
			default:
				if b.Token.MetadataError == nil || *b.Token.MetadataError != "the contract has no token URI" {
					t.Errorf("token %s metadataError = %v", b.TokenID, b.Token.MetadataError)
				}
			}
		}
	})

	t.Run("POST is 405", func(t *testing.T) {
		status, _, got := post(t, ts.API+"/v1/owners?chainId=1337&contractAddress="+lower(nft), "{}")
		if status != http.StatusMethodNotAllowed {
			t.Errorf("HTTP %d %s", status, got)
		}
	})
}

// TestOwnersIndexDroppedAtStart: the embedded dev chain starts empty at every start, so the
// owners index of a previous run is dropped and rebuilt from the new chain: a token of the
// previous run has no owner after a restart on the same store.
func TestOwnersIndexDroppedAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := deploymentConfig(t)
	cfg = strings.Replace(cfg, "pollInterval: 500ms", "pollInterval: 20ms", 1)
	ts := startServerIn(t, cfg, dir, io.Discard)
	addr := mintOnChainNFT(t, ts.API)
	query := "chainId=1337&contractAddress=" + strings.ToLower(addr.Hex())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, _, body := getOwners(t, ts.API, query)
		if status == 200 && strings.Contains(body, `"tokenId":"0x1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token 1 never indexed: HTTP %d %s", status, body)
		}
	}
	ts.stop()

	ts = startServerIn(t, cfg, dir, io.Discard)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, _, body := getOwners(t, ts.API, query)
		if status == 200 {
			if body != `{"balances":[],"pageKey":null,"error":null}` {
				t.Fatalf("after a restart on a fresh dev chain: %s, want no balances", body)
			}
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after a restart: HTTP %d %s", status, body)
		}
	}
}
