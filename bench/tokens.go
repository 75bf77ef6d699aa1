//go:build linux

package main

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
)

// tokenTarget is target (h): GET /v1/tokens/60/1337/{contract}/1 of a token whose record is
// cached, served by the same web3gate process as (b), whose eth_chainId rate is its baseline.
// The token is an OnChainERC721 (its tokenURI is a data: URI built on chain, so no document
// server takes part), deployed and minted through (b)'s JSON-RPC route; one GET fills the
// cache before the load.
func tokenTarget(ctx context.Context, b *target) (*target, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := rpc.DialOptions(ctx, b.url, rpc.WithHeader("X-API-Key", devHeaders[1][1]), rpc.WithHeader("Authorization", devHeaders[2][1]))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	accounts, err := devchain.DevAccounts(2)
	if err != nil {
		return nil, err
	}
	s := &contracts.Session{Client: ethclient.NewClient(c), Key: accounts[1].Key, ChainID: big.NewInt(devChainID)}
	nft := contracts.MustLoad("OnChainERC721")
	addr, err := s.Deploy(ctx, nft)
	if err != nil {
		return nil, fmt.Errorf("deploy OnChainERC721 through (b): %w", err)
	}
	if _, err := s.Transact(ctx, addr, nft, "mint", crypto.PubkeyToAddress(accounts[1].Key.PublicKey), big.NewInt(1)); err != nil {
		return nil, fmt.Errorf("mint through (b): %w", err)
	}
	base := strings.TrimSuffix(b.url, "/v1/web3/mainnet")
	h := &target{key: "h", name: "web3gate token metadata", method: http.MethodGet, headers: devHeaders,
		url:   fmt.Sprintf("%s/v1/tokens/60/%d/%s/1", base, devChainID, strings.ToLower(addr.Hex())),
		admin: b.admin, servers: b.servers}
	resp, body, err := probeGet(h.url, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("check (h) %s: %w", h.url, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"OnChain #1"`) {
		return nil, fmt.Errorf("check (h) %s: HTTP %d %s, want the token's metadata", h.url, resp.StatusCode, body)
	}
	return h, nil
}
