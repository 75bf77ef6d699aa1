package txmgr

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// Filling what a client left out of eth_sendTransaction / eth_signTransaction, the way geth
// fills it for its own accounts (TransactionArgs.setDefaults): first value and data, then the
// fees, then gas by estimation with every other field. A field the client gave is never
// changed. The filled request then goes through exactly the checks a complete one does.

// fillIn completes r with the fields its client left out, against the block b:
//
//   - value 0, data empty;
//   - fees on a London chain (b has a base fee), unless the client asked for type 0x0: a type
//     2 transaction, maxPriorityFeePerGas the node's eth_maxPriorityFeePerGas (capped at a
//     given maxFeePerGas) and maxFeePerGas 2 × the next block's base fee + the tip, which
//     stays includable through five full blocks in a row (each raises the base fee by
//     12.5 %; 1.125^5 ≈ 1.8);
//   - fees before London (or for type 0x0): gasPrice the node's eth_gasPrice;
//   - gas: eth_estimateGas with the other fields. An estimate the node refuses (a revert: code
//     3 with the reason and data, as geth answers) is the answer.
//
// It records what it filled in r.Filled, and does nothing to a complete request.
func (t *Manager) fillIn(ctx context.Context, ch Chain, b *blockInfo, r *txreq.Request) error {
	missing := r.Missing
	if missing == 0 {
		return nil
	}
	if missing.Has(txreq.FieldValue) {
		r.Value = new(big.Int)
	}
	if missing.Has(txreq.FieldData) {
		r.Data = []byte{}
	}
	fees, err := fillFees(ctx, ch, b, r)
	if err != nil {
		return err
	}
	if missing.Has(txreq.FieldGas) {
		gas, err := estimateGas(ctx, ch, r)
		if err != nil {
			return err
		}
		r.Gas = gas
	}
	r.Missing = 0
	r.Filled = missing&^txreq.Fees | fees
	return nil
}

// fillFees fills the fee fields left out of r (see fillIn) and returns which it filled.
func fillFees(ctx context.Context, ch Chain, b *blockInfo, r *txreq.Request) (txreq.Field, error) {
	m := r.Missing & txreq.Fees
	if m == 0 {
		return 0, nil
	}
	if m == txreq.Fees && (b.baseFee == nil || r.WantType == types.LegacyTxType) {
		price, err := callQuantity(ctx, ch, "eth_gasPrice")
		if err != nil {
			return 0, err
		}
		r.GasPrice = price
		r.Missing &^= txreq.Fees
		return txreq.FieldGasPrice, nil
	}
	if b.baseFee == nil {
		return 0, jsonrpc.ErrInvalidParams.With("maxFeePerGas and maxPriorityFeePerGas need a chain with a base fee (London); this chain has none: send gasPrice")
	}
	filled := m &^ txreq.FieldGasPrice
	if r.MaxPriorityFeePerGas == nil {
		tip, err := suggestTip(ctx, ch, b)
		if err != nil {
			return 0, err
		}
		if r.MaxFeePerGas != nil && tip.Cmp(r.MaxFeePerGas) > 0 {
			tip = new(big.Int).Set(r.MaxFeePerGas)
		}
		r.MaxPriorityFeePerGas = tip
	}
	if r.MaxFeePerGas == nil {
		fee := new(big.Int).Mul(nextBaseFee(b), big.NewInt(2))
		r.MaxFeePerGas = fee.Add(fee, r.MaxPriorityFeePerGas)
	}
	r.Missing &^= txreq.Fees
	return filled, nil
}

// suggestTip is the node's eth_maxPriorityFeePerGas; a node without the method gets
// eth_gasPrice less the base fee (at least 0).
func suggestTip(ctx context.Context, ch Chain, b *blockInfo) (*big.Int, error) {
	tip, err := callQuantity(ctx, ch, "eth_maxPriorityFeePerGas")
	var rpcErr *jsonrpc.Error
	if err == nil || !errors.As(err, &rpcErr) || !unsupportedMethod(rpcErr) {
		return tip, err
	}
	price, err := callQuantity(ctx, ch, "eth_gasPrice")
	if err != nil {
		return nil, err
	}
	price.Sub(price, b.baseFee)
	if price.Sign() < 0 {
		price.SetInt64(0)
	}
	return price, nil
}

// unsupportedMethod: the node does not offer a method (as opposed to failing it).
func unsupportedMethod(e *jsonrpc.Error) bool {
	return e.Code == -32601 || e.Code == -32600 || e.Code == -32602
}

// EIP-1559's base fee parameters, which most chains keep.
const (
	baseFeeChangeDenominator = 8
	elasticityMultiplier     = 2
)

// nextBaseFee is the base fee of the block after b under EIP-1559's rule (elasticity 2,
// change denominator 8).
func nextBaseFee(b *blockInfo) *big.Int {
	base := new(big.Int).Set(b.baseFee)
	target := b.gasLimit / elasticityMultiplier
	if target == 0 || b.gasUsed == target {
		return base
	}
	var used uint64
	if b.gasUsed > target {
		used = b.gasUsed - target
	} else {
		used = target - b.gasUsed
	}
	d := new(big.Int).Mul(b.baseFee, new(big.Int).SetUint64(used))
	d.Div(d, new(big.Int).SetUint64(target))
	d.Div(d, big.NewInt(baseFeeChangeDenominator))
	if b.gasUsed > target {
		if d.Sign() == 0 {
			d.SetInt64(1)
		}
		return base.Add(base, d)
	}
	return base.Sub(base, d)
}

// minNextBaseFee is the lowest base fee the block after b can have: an empty block lowers
// it by 1/8 (EIP-1559). A fee cap below it no next block accepts.
func minNextBaseFee(b *blockInfo) *big.Int {
	d := new(big.Int).Div(b.baseFee, big.NewInt(baseFeeChangeDenominator))
	return d.Sub(b.baseFee, d)
}

// estimateArgs is the call object of eth_estimateGas: the request without gas and nonce.
type estimateArgs struct {
	From                 common.Address   `json:"from"`
	To                   *common.Address  `json:"to,omitempty"`
	Value                *hexutil.Big     `json:"value"`
	Data                 hexutil.Bytes    `json:"data"`
	GasPrice             *hexutil.Big     `json:"gasPrice,omitempty"`
	MaxFeePerGas         *hexutil.Big     `json:"maxFeePerGas,omitempty"`
	MaxPriorityFeePerGas *hexutil.Big     `json:"maxPriorityFeePerGas,omitempty"`
	AccessList           types.AccessList `json:"accessList,omitempty"`
}

// estimateGas is the node's eth_estimateGas of r (fees filled already).
func estimateGas(ctx context.Context, ch Chain, r *txreq.Request) (uint64, error) {
	args, err := json.Marshal([]estimateArgs{{
		From: r.From, To: r.To, Value: (*hexutil.Big)(r.Value), Data: r.Data,
		GasPrice:             (*hexutil.Big)(r.GasPrice),
		MaxFeePerGas:         (*hexutil.Big)(r.MaxFeePerGas),
		MaxPriorityFeePerGas: (*hexutil.Big)(r.MaxPriorityFeePerGas),
		AccessList:           r.AccessList,
	}})
	if err != nil {
		return 0, err
	}
	gas, err := forwardAs[hexutil.Uint64](ctx, ch, "eth_estimateGas", args)
	return uint64(gas), err
}

// callQuantity calls a method without params that answers a quantity.
func callQuantity(ctx context.Context, ch Chain, method string) (*big.Int, error) {
	q, err := forwardAs[hexutil.Big](ctx, ch, method, []byte(`[]`))
	return q.ToInt(), err
}
