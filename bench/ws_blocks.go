//go:build linux

// (w)'s blocks: one Multicall of 100 ERC-20 transfers each, sent from one account.

package main

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/web3gate/web3gate/contracts"
)

// blockSender sends (w)'s block transactions from one account: each a Multicall of 100
// TestERC20.transfer calls, of one token unit to each of 100 fixed addresses.
type blockSender struct {
	client *ethclient.Client
	key    *ecdsa.PrivateKey
	signer types.Signer
	chain  *big.Int
	nonce  uint64
	gas    uint64
	token  common.Address
	multi  common.Address
	data   []byte
}

// newBlockSender deploys the token and the multicall, mints tokens to the multicall and
// prepares the block transaction.
func newBlockSender(ctx context.Context, client *ethclient.Client, key *ecdsa.PrivateKey) (*blockSender, error) {
	chain, err := client.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	erc20, mc := contracts.MustLoad("TestERC20"), contracts.MustLoad("Multicall")
	sess := &contracts.Session{Client: client, Key: key, ChainID: chain}
	bs := &blockSender{client: client, key: key, signer: types.LatestSignerForChainID(chain), chain: chain}
	if bs.token, err = sess.Deploy(ctx, erc20, "Bench Token", "BENCH", uint8(18)); err != nil {
		return nil, err
	}
	if bs.multi, err = sess.Deploy(ctx, mc); err != nil {
		return nil, err
	}
	if _, err := sess.Transact(ctx, bs.token, erc20, "mint", bs.multi, big.NewInt(1e15)); err != nil {
		return nil, err
	}
	calls := make([][]byte, wsLogsPerBlock)
	for i := range calls {
		if calls[i], err = erc20.Calldata("transfer", common.BigToAddress(big.NewInt(int64(0x3000+i))), big.NewInt(1)); err != nil {
			return nil, err
		}
	}
	if bs.data, err = mc.Calldata("aggregate", bs.token, calls); err != nil {
		return nil, err
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	// The first block writes 100 new balances, the most gas any will take.
	gas, err := client.EstimateGas(ctx, ethereumCall(from, bs.multi, bs.data))
	if err != nil {
		return nil, fmt.Errorf("estimate the block transaction's gas: %w", err)
	}
	bs.gas = gas + gas/5
	if bs.nonce, err = client.PendingNonceAt(ctx, from); err != nil {
		return nil, err
	}
	return bs, nil
}

// send signs and sends the next block transaction; at is the time (Unix ns) just before
// it was written to the server.
func (bs *blockSender) send(ctx context.Context) (common.Hash, int64, error) {
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{ChainID: bs.chain, Nonce: bs.nonce,
		GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(10e9), Gas: bs.gas, To: &bs.multi, Data: bs.data}), bs.signer, bs.key)
	if err != nil {
		return common.Hash{}, 0, err
	}
	at := time.Now().UnixNano()
	if err := bs.client.SendTransaction(ctx, tx); err != nil {
		return common.Hash{}, 0, fmt.Errorf("send the block transaction: %w", err)
	}
	bs.nonce++
	return tx.Hash(), at, nil
}

// ethereumCall is the eth_estimateGas call of data from from to to.
func ethereumCall(from, to common.Address, data []byte) ethereum.CallMsg {
	return ethereum.CallMsg{From: from, To: &to, Data: data}
}
