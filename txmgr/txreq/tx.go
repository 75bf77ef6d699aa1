package txreq

import (
	"encoding/json"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// Type is the transaction type the request makes: types.DynamicFeeTxType when it carries
// maxFeePerGas, else types.LegacyTxType.
func (r *Request) Type() uint8 {
	if r.MaxFeePerGas != nil {
		return types.DynamicFeeTxType
	}
	return types.LegacyTxType
}

// Tx builds the unsigned transaction with nonce for chainID: a LegacyTx (sign it with an
// EIP-155 signer for chainID, such as types.LatestSignerForChainID) or a DynamicFeeTx whose
// ChainID is chainID (the path's chain, which Parse checked a given chainId against). The
// transaction shares no memory with r.
func (r *Request) Tx(nonce uint64, chainID *big.Int) *types.Transaction {
	value := orZero(r.Value)
	if r.Type() == types.DynamicFeeTxType {
		return types.NewTx(&types.DynamicFeeTx{
			ChainID:    orZero(chainID),
			Nonce:      nonce,
			GasTipCap:  orZero(r.MaxPriorityFeePerGas),
			GasFeeCap:  r.MaxFeePerGas,
			Gas:        r.Gas,
			To:         r.To,
			Value:      value,
			Data:       r.Data,
			AccessList: copyAccessList(r.AccessList),
		})
	}
	return types.NewTx(&types.LegacyTx{ // NewTx copies every field
		Nonce:    nonce,
		GasPrice: orZero(r.GasPrice),
		Gas:      r.Gas,
		To:       r.To,
		Value:    value,
		Data:     r.Data,
	})
}

// MaxCost is the most the transaction can take from the sender's balance, the "funded"
// requirement: gas × (gasPrice or maxFeePerGas) + value.
func (r *Request) MaxCost() *big.Int {
	price := r.GasPrice
	if r.Type() == types.DynamicFeeTxType {
		price = r.MaxFeePerGas
	}
	c := new(big.Int).SetUint64(r.Gas)
	c.Mul(c, orZero(price))
	return c.Add(c, orZero(r.Value))
}

// copyAccessList copies al deeply: NewTx copies the list but shares the storage keys.
func copyAccessList(al types.AccessList) types.AccessList {
	if al == nil {
		return nil
	}
	c := make(types.AccessList, len(al))
	for i, t := range al {
		c[i] = types.AccessTuple{Address: t.Address, StorageKeys: append([]common.Hash(nil), t.StorageKeys...)}
	}
	return c
}

// orZero is v, or a new zero for nil: Parse leaves no quantity nil, a Request built by hand
// may.
func orZero(v *big.Int) *big.Int {
	if v == nil {
		return new(big.Int)
	}
	return v
}

// wire is the canonical transaction object: what MarshalJSON writes and Parse reads back.
type wire struct {
	From                 common.Address  `json:"from"`
	To                   *common.Address `json:"to"`
	Gas                  hexutil.Uint64  `json:"gas"`
	GasPrice             *hexutil.Big    `json:"gasPrice,omitempty"`
	MaxFeePerGas         *hexutil.Big    `json:"maxFeePerGas,omitempty"`
	MaxPriorityFeePerGas *hexutil.Big    `json:"maxPriorityFeePerGas,omitempty"`
	Value                *hexutil.Big    `json:"value"`
	Data                 hexutil.Bytes   `json:"data"`
	ChainID              *hexutil.Big    `json:"chainId,omitempty"`
	AccessList           *[]wireTuple    `json:"accessList,omitempty"`
	Nonce                *hexutil.Uint64 `json:"nonce,omitempty"`
}

type wireTuple struct {
	Address     common.Address `json:"address"`
	StorageKeys []common.Hash  `json:"storageKeys"`
}

// MarshalJSON writes r as a canonical transaction object (lower-case addresses, quantities
// without leading zeros, "data" rather than "input", "to" null for a contract creation, the
// client's nonce when it gave one), which ParseFill reads back to an equal Request (Parse
// too, for a request with "to" and without nonce): the form in which a validated request can
// be stored to be signed again later.
func (r *Request) MarshalJSON() ([]byte, error) {
	w := wire{
		From:                 r.From,
		To:                   r.To,
		Gas:                  hexutil.Uint64(r.Gas),
		GasPrice:             (*hexutil.Big)(r.GasPrice),
		MaxFeePerGas:         (*hexutil.Big)(r.MaxFeePerGas),
		MaxPriorityFeePerGas: (*hexutil.Big)(r.MaxPriorityFeePerGas),
		Value:                (*hexutil.Big)(orZero(r.Value)),
		Data:                 hexutil.Bytes(r.Data),
		ChainID:              (*hexutil.Big)(r.ChainID),
		Nonce:                (*hexutil.Uint64)(r.Nonce),
	}
	if w.Data == nil {
		w.Data = hexutil.Bytes{}
	}
	if r.AccessList != nil {
		al := make([]wireTuple, len(r.AccessList))
		for i, t := range r.AccessList {
			al[i] = wireTuple{Address: t.Address, StorageKeys: t.StorageKeys}
			if t.StorageKeys == nil {
				al[i].StorageKeys = []common.Hash{}
			}
		}
		w.AccessList = &al
	}
	return json.Marshal(w)
}
