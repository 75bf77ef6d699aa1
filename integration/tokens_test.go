package integration

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
)

// gatewaySession is a contracts.Session that deploys and transacts through web3gate's own
// JSON-RPC route, signing with dev account i (eth_sendRawTransaction is forwarded).
// mintOnChainNFT deploys an OnChainERC721 through the gateway at api (dev account 6) and
// mints its token 1 to that account.
func mintOnChainNFT(t *testing.T, api string) common.Address {
	t.Helper()
	s := gatewaySession(t, api, 6)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nft := contracts.MustLoad("OnChainERC721")
	addr, err := s.Deploy(ctx, nft)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transact(ctx, addr, nft, "mint", crypto.PubkeyToAddress(s.Key.PublicKey), big.NewInt(1)); err != nil {
		t.Fatal(err)
	}
	return addr
}

func gatewaySession(t *testing.T, api string, i int) *contracts.Session {
	t.Helper()
	c, err := rpc.DialOptions(context.Background(), api+"/v1/web3/mainnet",
		rpc.WithHeader("X-API-Key", config.DevClientID), rpc.WithHeader("Authorization", "Bearer "+config.DevToken))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	accounts, err := devchain.DevAccounts(i + 1)
	if err != nil {
		t.Fatal(err)
	}
	return &contracts.Session{Client: ethclient.NewClient(c), Key: accounts[i].Key, ChainID: big.NewInt(1337)}
}

// TestTokenRoutes: the /v1/tokens routes through the whole server on the embedded dev
// chain, with test contracts deployed through the gateway and documents on loopback.
func TestTokenRoutes(t *testing.T) {
	docs := http.NewServeMux()
	docs.HandleFunc("/token/1.json", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"name":"Alpha #1","image":"ipfs://QmImage/1.png","attributes":[{"trait_type":"Color","value":"red"}]}`)
	})
	docs.HandleFunc("/collection.json", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"name":"Alpha","seller_fee_basis_points":250}`)
	})
	docs.HandleFunc("/ipfs/QmMultiToken/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"name":"multi","description":%q}`, strings.TrimPrefix(r.URL.Path, "/ipfs/QmMultiToken/"))
	})
	srv := httptest.NewServer(docs)
	defer srv.Close()

	cfg := deploymentConfig(t)
	cfg = strings.Replace(cfg, "allowNetworks: []", "allowNetworks: [127.0.0.0/8]", 1)
	cfg = strings.Replace(cfg, "ipfsGateways: [https://ipfs.io/ipfs/, https://dweb.link/ipfs/]", "ipfsGateways: ["+srv.URL+"/ipfs/]", 1)
	if !strings.Contains(cfg, srv.URL+"/ipfs/") || !strings.Contains(cfg, "127.0.0.0/8") {
		t.Fatal("config.yaml changed: the metadata test settings were not applied")
	}
	ts := startServer(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := gatewaySession(t, ts.API, 5)
	me := crypto.PubkeyToAddress(s.Key.PublicKey)
	erc721, erc1155, erc20 := contracts.MustLoad("TestERC721"), contracts.MustLoad("TestERC1155"), contracts.MustLoad("TestERC20")
	deploy := func(c *contracts.Contract, args ...any) common.Address {
		addr, err := s.Deploy(ctx, c, args...)
		if err != nil {
			t.Fatalf("deploy %s: %v", c.Name, err)
		}
		return addr
	}
	transact := func(to common.Address, c *contracts.Contract, method string, args ...any) {
		if _, err := s.Transact(ctx, to, c, method, args...); err != nil {
			t.Fatalf("%s.%s: %v", c.Name, method, err)
		}
	}
	nft := deploy(erc721, "Alpha", "ALPHA")
	transact(nft, erc721, "mint", me, big.NewInt(1))
	transact(nft, erc721, "setTokenURI", big.NewInt(1), srv.URL+"/token/1.json")
	transact(nft, erc721, "setContractURI", srv.URL+"/collection.json")
	multi := deploy(erc1155, "Multi", "MLT", "ipfs://QmMultiToken/{id}.json")
	transact(multi, erc1155, "mint", me, big.NewInt(255), big.NewInt(3))
	coin := deploy(erc20, "Coin", "CN", uint8(18))
	plain := deploy(contracts.MustLoad("Plain"))

	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	base := ts.API + "/v1/tokens/60/1337/"
	id255 := fmt.Sprintf("%064x", 255)
	for _, c := range []struct {
		name, path string
		status     int
		want       string
	}{
		{"ERC721 token", lower(nft) + "/1", 200, `{"token":{"coinType":60,"chainId":1337,"contractAddress":"` + lower(nft) + `",
			"id":"0x1","tokenType":"ERC721","tokenUri":"` + srv.URL + `/token/1.json",
			"metadata":{"name":"Alpha #1","description":null,"image":"ipfs://QmImage/1.png","animationUrl":null,
				"externalUrl":null,"backgroundColor":null,"attributes":[{"traitType":"Color","value":"red"}],"properties":{}},
			"rawMetadata":{"name":"Alpha #1","image":"ipfs://QmImage/1.png","attributes":[{"trait_type":"Color","value":"red"}]},
			"metadataError":null,"timeLastUpdated":"*"},"error":null}`},
		{"hex id, checksummed address", nft.Hex() + "/0x01", 200, `*`},
		{"forceRefresh", lower(nft) + "/1?forceRefresh=true", 200, `*`},
		{"ERC1155 token over ipfs", lower(multi) + "/0xff", 200, `{"token":{"coinType":60,"chainId":1337,"contractAddress":"` + lower(multi) + `",
			"id":"0xff","tokenType":"ERC1155","tokenUri":"ipfs://QmMultiToken/` + id255 + `.json",
			"metadata":{"name":"multi","description":"` + id255 + `.json","image":null,"animationUrl":null,
				"externalUrl":null,"backgroundColor":null,"attributes":[],"properties":{}},
			"rawMetadata":{"name":"multi","description":"` + id255 + `.json"},"metadataError":null,"timeLastUpdated":"*"},"error":null}`},
		{"ERC721 contract", lower(nft), 200, `{"contract":{"coinType":60,"chainId":1337,"address":"` + lower(nft) + `",
			"tokenType":"ERC721","name":"Alpha","symbol":"ALPHA","decimals":null,"totalSupply":"1",
			"contractUri":"` + srv.URL + `/collection.json","metadata":{"name":"Alpha","description":null,"image":null,
				"external_link":null,"seller_fee_basis_points":250,"fee_recipient":null},"metadataError":null,"timeLastUpdated":"*"},"error":null}`},
		{"ERC20 contract", lower(coin), 200, `{"contract":{"coinType":60,"chainId":1337,"address":"` + lower(coin) + `",
			"tokenType":"ERC20","name":"Coin","symbol":"CN","decimals":18,"totalSupply":"0",
			"contractUri":null,"metadata":null,"metadataError":null,"timeLastUpdated":"*"},"error":null}`},
		{"contract of no standard", lower(plain), 200, `{"contract":{"coinType":60,"chainId":1337,"address":"` + lower(plain) + `",
			"tokenType":"UNKNOWN","name":null,"symbol":null,"decimals":null,"totalSupply":null,
			"contractUri":null,"metadata":null,"metadataError":null,"timeLastUpdated":"*"},"error":null}`},
		{"no such ERC721 token", lower(nft) + "/2", 404, `{"error":{"code":404,"status":"Not Found","request":"*","message":"token does not exist"}}`},
		{"no such ERC1155 token", lower(multi) + "/256", 404, `*`},
		{"token route on an ERC20", lower(coin) + "/1", 404, `*`},
		{"token route on no standard", lower(plain) + "/1", 404, `*`},
		{"no code: contract", lower(me), 404, `{"error":{"code":404,"status":"Not Found","request":"*","message":"no contract at this address"}}`},
		{"no code: token", lower(me) + "/1", 404, `*`},
		{"bad checksum", "0x" + flipCase(nft.Hex()[2:]) + "/1", 400, `*`},
		{"short address", lower(nft)[:40] + "/1", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"contractAddress: must be a 0x-prefixed 20-byte hex address"}}`},
		{"bad token id", lower(nft) + "/abc", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"tokenId: must be a decimal or 0x-hex integer"}}`},
		{"token id over 256 bits", lower(nft) + "/0x1" + strings.Repeat("0", 64), 400, `*`},
		{"bad forceRefresh", lower(nft) + "/1?forceRefresh=yes", 400, `{"error":{"code":400,"status":"Bad Request","request":"*","message":"forceRefresh: must be true or false"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := get(t, base+c.path)
			if status != c.status {
				t.Fatalf("HTTP %d, want %d: %s", status, c.status, body)
			}
			if err := matchJSON(c.want, []byte(body)); c.want != "*" && err != nil {
				t.Errorf("%v\n%s", err, body)
			}
		})
	}
	for _, c := range []struct {
		name, url string
		status    int
	}{
		{"coin type not EVM", ts.API + "/v1/tokens/0/1337/" + lower(nft), 400},
		{"coin type not a number", ts.API + "/v1/tokens/eth/1337/" + lower(nft) + "/1", 400},
		{"chain not configured", ts.API + "/v1/tokens/60/137/" + lower(nft) + "/1", 404},
		{"chain id not a number", ts.API + "/v1/tokens/60/mainnet/" + lower(nft), 400},
		{"too many segments", ts.API + "/v1/tokens/60/1337/" + lower(nft) + "/1/2", 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := get(t, c.url)
			if status != c.status || !strings.Contains(body, `"request":`) {
				t.Errorf("HTTP %d %s, want %d with the error object", status, body, c.status)
			}
		})
	}
	t.Run("POST is 405", func(t *testing.T) {
		status, _, body := post(t, base+lower(nft), "{}")
		if status != http.StatusMethodNotAllowed {
			t.Errorf("HTTP %d %s", status, body)
		}
	})
}

// flipCase swaps the case of the letters of s (an address tail), breaking its checksum.
func flipCase(s string) string {
	out := []byte(s)
	for i, c := range out {
		switch {
		case 'a' <= c && c <= 'f':
			out[i] = c - 32
		case 'A' <= c && c <= 'F':
			out[i] = c + 32
		}
	}
	return string(out)
}

// TestDevChainRecordsDroppedAtStart: the embedded dev chain starts empty at every start, so
// the metadata records a previous run stored for it are dropped: a contract of that run is
// not served from the store after a restart.
func TestDevChainRecordsDroppedAtStart(t *testing.T) {
	dir := t.TempDir()
	cfg := deploymentConfig(t)
	ts := startServerIn(t, cfg, dir, io.Discard)
	addr := mintOnChainNFT(t, ts.API)
	path := "/v1/tokens/60/1337/" + strings.ToLower(addr.Hex()) + "/1"
	if status, body := get(t, ts.API+path); status != http.StatusOK {
		t.Fatalf("HTTP %d %s", status, body)
	}
	ts.stop()

	ts = startServerIn(t, cfg, dir, io.Discard)
	if status, body := get(t, ts.API+path); status != http.StatusNotFound {
		t.Fatalf("after a restart on a fresh dev chain: HTTP %d %s, want 404 (no contract)", status, body)
	}
}
