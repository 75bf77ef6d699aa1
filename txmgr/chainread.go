package txmgr

// Reads of the chain: the latest block (reused while fresh), balances, nonces and receipts.

import (
	"context"
	"encoding/json"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// blockInfo is what filling and the checks need from the latest block.
type blockInfo struct {
	number   uint64
	gasLimit uint64
	gasUsed  uint64
	baseFee  *big.Int // nil before London
	at       time.Time
	head     uint64 // the pool's head when it was read (headTracker)
}

// blockInfoMaxAge bounds how long a read latest block is reused; a new head seen by the
// pool's head tracking replaces it at once, and a fee it would refuse is checked again
// against a block read anew.
const blockInfoMaxAge = 500 * time.Millisecond

// headTracker is a chain that follows its head (upstreams.Pool).
type headTracker interface{ Head() uint64 }

// latestBlock is the chain's latest block: the one an earlier call read while it is fresh
// (reused), else read now.
func (t *Manager) latestBlock(ctx context.Context, ch Chain, chainID uint64) (b *blockInfo, reused bool, err error) {
	if v, ok := t.blocks.Load(chainID); ok {
		b := v.(*blockInfo)
		ht, tracked := ch.(headTracker)
		if time.Since(b.at) < blockInfoMaxAge && (!tracked || ht.Head() == b.head) {
			return b, true, nil
		}
	}
	b, err = t.readLatestBlock(ctx, ch, chainID)
	return b, false, err
}

// readLatestBlock reads the latest block from the chain, for latestBlock to reuse.
func (t *Manager) readLatestBlock(ctx context.Context, ch Chain, chainID uint64) (*blockInfo, error) {
	var head uint64
	if ht, tracked := ch.(headTracker); tracked {
		head = ht.Head()
	}
	res, err := ch.Forward(ctx, "eth_getBlockByNumber", []byte(`["latest",false]`))
	if err != nil {
		return nil, err
	}
	var h struct {
		Number   *hexutil.Big `json:"number"`
		GasLimit *hexutil.Big `json:"gasLimit"`
		GasUsed  *hexutil.Big `json:"gasUsed"`
		BaseFee  *hexutil.Big `json:"baseFeePerGas"`
	}
	if err := json.Unmarshal(res, &h); err != nil || h.Number == nil || h.GasLimit == nil {
		return nil, jsonrpc.ErrUpstreamUnavailable.With("the node answered the latest block with something else")
	}
	b := &blockInfo{number: h.Number.ToInt().Uint64(), gasLimit: h.GasLimit.ToInt().Uint64(), baseFee: (*big.Int)(h.BaseFee),
		at: time.Now(), head: head}
	if h.GasUsed != nil {
		b.gasUsed = h.GasUsed.ToInt().Uint64()
	}
	t.blocks.Store(chainID, b)
	return b, nil
}

func (t *Manager) balance(ctx context.Context, ch Chain, addr common.Address) (*big.Int, error) {
	b, err := forwardAs[hexutil.Big](ctx, ch, "eth_getBalance", []byte(`["`+addr.Hex()+`","latest"]`))
	return b.ToInt(), err
}

// forwardAs sends method(params) to ch and decodes the result as a T; a result of another
// shape is the node's failure (-32011).
func forwardAs[T any](ctx context.Context, ch Chain, method string, params []byte) (T, error) {
	var v T
	res, err := ch.Forward(ctx, method, params)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(res, &v); err != nil {
		return v, jsonrpc.ErrUpstreamUnavailable.Withf("the node answered %s with something else", method)
	}
	return v, nil
}

func (t *Manager) nonceAt(ctx context.Context, ch Chain, addr common.Address, block string) (uint64, error) {
	n, err := forwardAs[hexutil.Uint64](ctx, ch, "eth_getTransactionCount", []byte(`["`+addr.Hex()+`","`+block+`"]`))
	return uint64(n), err
}

type minedAt struct {
	number uint64
	hash   common.Hash
}

// receipt is where hash was mined, or nil when the node has no receipt for it.
func (t *Manager) receipt(ctx context.Context, ch Chain, hash common.Hash) (*minedAt, error) {
	res, err := ch.Forward(ctx, "eth_getTransactionReceipt", []byte(`["`+hash.Hex()+`"]`))
	if err != nil {
		return nil, err
	}
	if string(res) == "null" {
		return nil, nil
	}
	var rc struct {
		BlockNumber *hexutil.Big `json:"blockNumber"`
		BlockHash   *common.Hash `json:"blockHash"`
	}
	if err := json.Unmarshal(res, &rc); err != nil || rc.BlockNumber == nil || rc.BlockHash == nil {
		return nil, nil // a pending receipt shape: not mined
	}
	return &minedAt{number: rc.BlockNumber.ToInt().Uint64(), hash: *rc.BlockHash}, nil
}
