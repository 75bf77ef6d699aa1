// Command samples deploys a few test tokens on a dev chain through a running web3gate, so
// that the /v1/tokens (and /v1/owners) examples of the README have something to answer:
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
	"net/url"
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
	if _, err := url.Parse(base); err != nil {
		return err
	}
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
	do := func(what string, f func() error) error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}

	erc721 := contracts.MustLoad("TestERC721")
	alpha, err := s.Deploy(ctx, erc721, "Alpha", "ALPHA")
	if err != nil {
		return fmt.Errorf("deploy TestERC721: %w", err)
	}
	for id := int64(1); id <= 3; id++ {
		doc := fmt.Sprintf(`data:application/json,{"name":"Alpha #%d","description":"A sample token","image":"ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/%d.png","attributes":[{"trait_type":"Number","value":%d}]}`, id, id, id)
		err := do("mint Alpha", func() error {
			if _, err := s.Transact(ctx, alpha, erc721, "mint", me, big.NewInt(id)); err != nil {
				return err
			}
			_, err := s.Transact(ctx, alpha, erc721, "setTokenURI", big.NewInt(id), doc)
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := do("contract URI", func() error {
		_, err := s.Transact(ctx, alpha, erc721, "setContractURI",
			`data:application/json,{"name":"Alpha","description":"Sample collection","seller_fee_basis_points":250,"fee_recipient":"`+strings.ToLower(me.Hex())+`"}`)
		return err
	}); err != nil {
		return err
	}

	erc1155 := contracts.MustLoad("TestERC1155")
	multi, err := s.Deploy(ctx, erc1155, "Multi", "MULTI", `data:application/json,{"name":"Multi {id}","description":"A sample edition"}`)
	if err != nil {
		return fmt.Errorf("deploy TestERC1155: %w", err)
	}
	if err := do("mint Multi", func() error {
		_, err := s.Transact(ctx, multi, erc1155, "mintBatch", me, []*big.Int{big.NewInt(1), big.NewInt(2)}, []*big.Int{big.NewInt(10), big.NewInt(5)})
		return err
	}); err != nil {
		return err
	}

	onChain, err := s.Deploy(ctx, contracts.MustLoad("OnChainERC721"))
	if err != nil {
		return fmt.Errorf("deploy OnChainERC721: %w", err)
	}
	if err := do("mint OnChain", func() error {
		_, err := s.Transact(ctx, onChain, contracts.MustLoad("OnChainERC721"), "mint", me, big.NewInt(7))
		return err
	}); err != nil {
		return err
	}

	erc20 := contracts.MustLoad("TestERC20")
	coin, err := s.Deploy(ctx, erc20, "Sample Coin", "SMPL", uint8(18))
	if err != nil {
		return fmt.Errorf("deploy TestERC20: %w", err)
	}
	if err := do("mint Coin", func() error {
		_, err := s.Transact(ctx, coin, erc20, "mint", me, new(big.Int).Exp(big.NewInt(10), big.NewInt(24), nil))
		return err
	}); err != nil {
		return err
	}

	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	tokens := fmt.Sprintf("%s/v1/tokens/60/%d", strings.TrimSuffix(base, "/"), chainID)
	fmt.Printf("owner %s (dev account 8)\n", lower(me))
	fmt.Printf("ERC721  Alpha    %s  tokens 1, 2, 3\n", lower(alpha))
	fmt.Printf("ERC1155 Multi    %s  ids 1 (10), 2 (5)\n", lower(multi))
	fmt.Printf("ERC721  OnChain  %s  token 7\n", lower(onChain))
	fmt.Printf("ERC20   SMPL     %s\n\n", lower(coin))
	fmt.Printf("curl -s %s/%s/1\n", tokens, lower(alpha))
	fmt.Printf("curl -s %s/%s/0x2\n", tokens, lower(multi))
	fmt.Printf("curl -s %s/%s/7\n", tokens, lower(onChain))
	fmt.Printf("curl -s %s/%s\n", tokens, lower(alpha))
	fmt.Printf("curl -s %s/%s\n", tokens, lower(coin))
	return nil
}
