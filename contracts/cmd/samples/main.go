// Command samples deploys a few test tokens on a dev chain through a running web3gate, so
// that the /v1/tokens and /v1/owners examples of docs/tokens-and-nft.md have something to answer:
//
//	go run . &                              # web3gate on the embedded dev chain
//	go run ./contracts/cmd/samples          # deploys, mints, prints curl commands
//
// Every token's metadata is a data: URI, so no document server is needed. It signs with dev
// account 8 (a pre-funded account of the dev chain) and sends through web3gate's JSON-RPC
// route with the quickstart credentials.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8545", "web3gate's base URL")
	chainID := flag.Int64("chain-id", 1337, "the dev chain's id")
	clientID := flag.String("client-id", "web3gate-dev", "X-API-Key")
	token := flag.String("token", "dev-access-token", "bearer access token")
	flag.Parse()
	if err := run(*base, *chainID, *clientID, *token); err != nil {
		fmt.Fprintln(os.Stderr, "samples:", err)
		os.Exit(1)
	}
}

func run(base string, chainID int64, clientID, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := rpc.DialOptions(ctx, strings.TrimSuffix(base, "/")+fmt.Sprintf("/v1/web3/chains/%d", chainID),
		rpc.WithHeader("X-API-Key", clientID), rpc.WithHeader("Authorization", "Bearer "+token))
	if err != nil {
		return err
	}
	defer c.Close()
	accounts, err := devchain.DevAccounts(9)
	if err != nil {
		return err
	}
	key := accounts[8].Key
	s := &contracts.Session{Client: ethclient.NewClient(c), Key: key, ChainID: big.NewInt(chainID)}
	me := crypto.PubkeyToAddress(key.PublicKey)
	deploy := func(c *contracts.Contract, args ...any) (common.Address, error) {
		addr, err := s.Deploy(ctx, c, args...)
		if err != nil {
			return addr, fmt.Errorf("deploy %s: %w", c.Name, err)
		}
		return addr, nil
	}
	// send runs the transactions in order, stopping at the first failure.
	send := func(to common.Address, c *contracts.Contract, calls ...[]any) error {
		for _, call := range calls {
			if _, err := s.Transact(ctx, to, c, call[0].(string), call[1:]...); err != nil {
				return fmt.Errorf("%s.%s: %w", c.Name, call[0], err)
			}
		}
		return nil
	}

	erc721, erc1155 := contracts.MustLoad("TestERC721"), contracts.MustLoad("TestERC1155")
	onChainC, erc20 := contracts.MustLoad("OnChainERC721"), contracts.MustLoad("TestERC20")
	alpha, err := deploy(erc721, "Alpha", "ALPHA")
	if err != nil {
		return err
	}
	var alphaCalls [][]any
	for id := int64(1); id <= 3; id++ {
		doc := fmt.Sprintf(`data:application/json,{"name":"Alpha #%d","description":"A sample token","image":"ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/%d.png","attributes":[{"trait_type":"Number","value":%d}]}`, id, id, id)
		alphaCalls = append(alphaCalls, []any{"mint", me, big.NewInt(id)}, []any{"setTokenURI", big.NewInt(id), doc})
	}
	alphaCalls = append(alphaCalls, []any{"setContractURI",
		`data:application/json,{"name":"Alpha","description":"Sample collection","seller_fee_basis_points":250,"fee_recipient":"` + strings.ToLower(me.Hex()) + `"}`})
	if err := send(alpha, erc721, alphaCalls...); err != nil {
		return err
	}
	multi, err := deploy(erc1155, "Multi", "MULTI", `data:application/json,{"name":"Multi {id}","description":"A sample edition"}`)
	if err != nil {
		return err
	}
	if err := send(multi, erc1155, []any{"mintBatch", me, []*big.Int{big.NewInt(1), big.NewInt(2)}, []*big.Int{big.NewInt(10), big.NewInt(5)}}); err != nil {
		return err
	}
	onChain, err := deploy(onChainC)
	if err != nil {
		return err
	}
	if err := send(onChain, onChainC, []any{"mint", me, big.NewInt(7)}); err != nil {
		return err
	}
	coin, err := deploy(erc20, "Sample Coin", "SMPL", uint8(18))
	if err != nil {
		return err
	}
	if err := send(coin, erc20, []any{"mint", me, new(big.Int).Exp(big.NewInt(10), big.NewInt(24), nil)}); err != nil {
		return err
	}

	// A second owner for the /v1/owners examples: Alpha #3 and 4 of Multi id 1 go to dev
	// account 7.
	other := accounts[7].Address
	if err := send(alpha, erc721, []any{"transferFrom", me, other, big.NewInt(3)}); err != nil {
		return err
	}
	if err := send(multi, erc1155, []any{"safeTransferFrom", me, other, big.NewInt(1), big.NewInt(4), []byte{}}); err != nil {
		return err
	}

	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	tokens := fmt.Sprintf("%s/v1/tokens/60/%d", strings.TrimSuffix(base, "/"), chainID)
	owners := fmt.Sprintf("%s/v1/owners?chainId=%d", strings.TrimSuffix(base, "/"), chainID)
	fmt.Printf("owner %s (dev account 8); %s (dev account 7) holds Alpha #3 and 4 of Multi id 1\n", lower(me), lower(other))
	fmt.Printf("ERC721  Alpha    %s  tokens 1, 2, 3\n", lower(alpha))
	fmt.Printf("ERC1155 Multi    %s  ids 1 (10), 2 (5)\n", lower(multi))
	fmt.Printf("ERC721  OnChain  %s  token 7\n", lower(onChain))
	fmt.Printf("ERC20   SMPL     %s\n\n", lower(coin))
	fmt.Printf("curl -s %s/%s/1\n", tokens, lower(alpha))
	fmt.Printf("curl -s %s/%s/0x2\n", tokens, lower(multi))
	fmt.Printf("curl -s %s/%s/7\n", tokens, lower(onChain))
	fmt.Printf("curl -s %s/%s\n", tokens, lower(alpha))
	fmt.Printf("curl -s %s/%s\n", tokens, lower(coin))
	fmt.Printf("curl -s '%s&contractAddress=%s&tokenId=1'\n", owners, lower(multi))
	fmt.Printf("curl -s '%s&contractAddresses=%s,%s&limit=2'\n", owners, lower(alpha), lower(onChain))
	fmt.Printf("curl -s '%s&contractAddress=%s&tokenId=7&nfts=true&fetchNftMetadata=true'\n", owners, lower(onChain))
	return nil
}
