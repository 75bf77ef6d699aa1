// Package txreq parses and validates the transaction object of eth_sendTransaction and
// eth_signTransaction, and checks the parts of it that need no chain state beyond the block gas
// limit. It does no I/O: the sign stage calls it with the call's params and the path's chain,
// then checks funds and signing rules with chain data of its own.
//
// The API requires every field of the object except nonce, which must be left out because
// the service supplies it:
//
//	{"from", "to", "gas", "value", "data", and "gasPrice" (legacy, type 0x0)
//	 or "maxFeePerGas" and "maxPriorityFeePerGas" (EIP-1559, type 0x2)}
//
// Optional: "chainId" (must equal the path's chain), "type" ("0x0" or "0x2", matching the fee
// fields), "accessList" (type 0x2 only) and "input" as an alias of "data". Anything else is
// rejected by name, so that a misspelt field ("gasprice") does not silently vanish.
//
// Because "to" is required, contract creation is not supported through these methods: deploy
// with eth_sendRawTransaction, or from a key the caller holds.
//
// Every error is a *jsonrpc.Error: -32602 naming the field for a malformed object (Parse), and
// -32000 with the reason for a gas limit the chain would refuse (CheckGas, ErrGas).
package txreq

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Request is a validated eth_sendTransaction / eth_signTransaction transaction object.
// Exactly one of GasPrice (a legacy, type 0 transaction, signed with EIP-155) and the pair
// MaxFeePerGas, MaxPriorityFeePerGas (an EIP-1559, type 2 transaction) is set.
type Request struct {
	From common.Address
	To   *common.Address // never nil from Parse: contract creation is not supported
	Gas  uint64
	// Value and the fees are non-negative and fit 256 bits.
	Value *big.Int
	Data  []byte

	GasPrice *big.Int // legacy (type 0), EIP-155 signed

	MaxFeePerGas         *big.Int // EIP-1559 (type 2), instead of GasPrice
	MaxPriorityFeePerGas *big.Int // EIP-1559 (type 2), <= MaxFeePerGas

	ChainID    *big.Int         // as given (equal to the path's chain), or nil
	AccessList types.AccessList // type 2 only; nil when not given
}

// known reports whether key is a field a transaction object may carry. nonce is not: it gets
// its own message.
func known(key string) bool {
	switch key {
	case "from", "to", "gas", "value", "data", "input",
		"gasPrice", "maxFeePerGas", "maxPriorityFeePerGas",
		"chainId", "type", "accessList":
		return true
	}
	return false
}

// Parse decodes params, the raw JSON array of an eth_sendTransaction or eth_signTransaction
// call, for the chain chainID: exactly one transaction object. Fields are checked in a fixed
// order (the object's keys, then from, to, gas, the fees, value, data, chainId, type,
// accessList), and the first failure is returned as -32602 naming the field.
func Parse(params []byte, chainID uint64) (*Request, error) {
	var ps []json.RawMessage
	if len(bytes.TrimSpace(params)) == 0 {
		ps = nil // params left out: zero params
	} else if err := json.Unmarshal(params, &ps); err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("params must be an array")
	}
	if len(ps) != 1 {
		return nil, jsonrpc.ErrInvalidParams.Withf("expected 1 param, got %d", len(ps))
	}
	obj, err := scanObject(ps[0], "", func(key string) error {
		if key == "nonce" {
			return jsonrpc.ErrInvalidParams.With("nonce must be omitted: the service supplies it")
		}
		if !known(key) {
			return jsonrpc.ErrInvalidParams.Withf("unknown field %s", quoteKey(key))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, jsonrpc.ErrInvalidParams.With("params[0] must be a transaction object")
	}
	return obj.request(chainID)
}

// object is a scanned JSON object: its members by key, JSON null included.
type object map[string]json.RawMessage

// get returns the member key unless it is absent or null.
func (o object) get(key string) (json.RawMessage, bool) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func missing(name string) error {
	return jsonrpc.ErrInvalidParams.With("missing field: " + name)
}

func (o object) request(chainID uint64) (*Request, error) {
	r := &Request{}
	var err error

	raw, ok := o.get("from")
	if !ok {
		return nil, missing("from")
	}
	if r.From, err = address(raw, "from"); err != nil {
		return nil, err
	}

	if raw, present := o["to"]; !present {
		return nil, missing("to")
	} else if isNull(raw) {
		return nil, jsonrpc.ErrInvalidParams.With("to is required")
	}
	to, err := address(o["to"], "to")
	if err != nil {
		return nil, err
	}
	r.To = &to

	raw, ok = o.get("gas")
	if !ok {
		return nil, missing("gas")
	}
	gas, err := quantity(raw, "gas", 64)
	if err != nil {
		return nil, err
	}
	r.Gas = gas.Uint64()

	if err := o.fees(r); err != nil {
		return nil, err
	}

	raw, ok = o.get("value")
	if !ok {
		return nil, missing("value")
	}
	if r.Value, err = quantity(raw, "value", 256); err != nil {
		return nil, err
	}

	if r.Data, err = o.data(); err != nil {
		return nil, err
	}

	if raw, ok := o.get("chainId"); ok {
		if r.ChainID, err = quantity(raw, "chainId", 256); err != nil {
			return nil, err
		}
		if !r.ChainID.IsUint64() || r.ChainID.Uint64() != chainID {
			return nil, jsonrpc.ErrInvalidParams.Withf("chainId %s does not match the chain of the path (%d)",
				hexutil.EncodeBig(r.ChainID), chainID)
		}
	}

	if raw, ok := o.get("type"); ok {
		t, err := quantity(raw, "type", 256)
		if err != nil {
			return nil, err
		}
		switch {
		case t.Sign() == 0 && r.GasPrice == nil:
			return nil, jsonrpc.ErrInvalidParams.With("type 0x0 requires gasPrice, not maxFeePerGas and maxPriorityFeePerGas")
		case t.IsUint64() && t.Uint64() == types.DynamicFeeTxType && r.GasPrice != nil:
			return nil, jsonrpc.ErrInvalidParams.With("type 0x2 requires maxFeePerGas and maxPriorityFeePerGas, not gasPrice")
		case t.Sign() != 0 && (!t.IsUint64() || t.Uint64() != types.DynamicFeeTxType):
			return nil, jsonrpc.ErrInvalidParams.Withf("unsupported transaction type %s: use 0x0 (gasPrice) or 0x2 (maxFeePerGas and maxPriorityFeePerGas)",
				hexutil.EncodeBig(t))
		}
	}

	if raw, ok := o.get("accessList"); ok {
		if r.GasPrice != nil {
			return nil, jsonrpc.ErrInvalidParams.With("accessList needs a type 0x2 transaction (maxFeePerGas and maxPriorityFeePerGas), not gasPrice")
		}
		if r.AccessList, err = accessList(raw); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// fees reads either gasPrice or both EIP-1559 fields.
func (o object) fees(r *Request) error {
	gp, hasGP := o.get("gasPrice")
	mf, hasMF := o.get("maxFeePerGas")
	mp, hasMP := o.get("maxPriorityFeePerGas")
	switch {
	case hasGP && (hasMF || hasMP):
		return jsonrpc.ErrInvalidParams.With("gasPrice cannot be combined with maxFeePerGas or maxPriorityFeePerGas")
	case hasGP:
		var err error
		r.GasPrice, err = quantity(gp, "gasPrice", 256)
		return err
	case !hasMF && !hasMP:
		return missing("gasPrice (or maxFeePerGas and maxPriorityFeePerGas)")
	case !hasMF:
		return missing("maxFeePerGas")
	case !hasMP:
		return missing("maxPriorityFeePerGas")
	}
	var err error
	if r.MaxFeePerGas, err = quantity(mf, "maxFeePerGas", 256); err != nil {
		return err
	}
	if r.MaxPriorityFeePerGas, err = quantity(mp, "maxPriorityFeePerGas", 256); err != nil {
		return err
	}
	if r.MaxPriorityFeePerGas.Cmp(r.MaxFeePerGas) > 0 {
		return jsonrpc.ErrInvalidParams.Withf("maxPriorityFeePerGas %s exceeds maxFeePerGas %s",
			hexutil.EncodeBig(r.MaxPriorityFeePerGas), hexutil.EncodeBig(r.MaxFeePerGas))
	}
	return nil
}

// data reads data, or its alias input; when both are given they must be equal.
func (o object) data() ([]byte, error) {
	draw, hasData := o.get("data")
	iraw, hasInput := o.get("input")
	var d, in []byte
	var err error
	if hasData {
		if d, err = hexData(draw, "data"); err != nil {
			return nil, err
		}
	}
	if hasInput {
		if in, err = hexData(iraw, "input"); err != nil {
			return nil, err
		}
	}
	switch {
	case hasData && hasInput && !bytes.Equal(d, in):
		return nil, jsonrpc.ErrInvalidParams.With("data and input differ: send one of them")
	case hasData:
		return d, nil
	case hasInput:
		return in, nil
	}
	return nil, missing("data")
}

// accessList reads an EIP-2930 access list: [{"address", "storageKeys": [32-byte keys]}].
func accessList(raw json.RawMessage) (types.AccessList, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, jsonrpc.ErrInvalidParams.With("accessList must be an array")
	}
	al := make(types.AccessList, 0, len(elems))
	for i, e := range elems {
		path := "accessList[" + strconv.Itoa(i) + "]"
		tuple, err := scanObject(e, path+".", func(key string) error {
			if key != "address" && key != "storageKeys" {
				return jsonrpc.ErrInvalidParams.Withf("unknown field %s", quoteKey(path+"."+key))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if tuple == nil {
			return nil, jsonrpc.ErrInvalidParams.Withf("%s must be an object", path)
		}
		araw, ok := tuple.get("address")
		if !ok {
			return nil, missing(path + ".address")
		}
		addr, err := address(araw, path+".address")
		if err != nil {
			return nil, err
		}
		kraw, ok := tuple.get("storageKeys")
		if !ok {
			return nil, missing(path + ".storageKeys")
		}
		var keys []json.RawMessage
		if err := json.Unmarshal(kraw, &keys); err != nil {
			return nil, jsonrpc.ErrInvalidParams.Withf("%s.storageKeys must be an array", path)
		}
		hashes := make([]common.Hash, len(keys))
		for j, k := range keys {
			if hashes[j], err = storageKey(k, path+".storageKeys["+strconv.Itoa(j)+"]"); err != nil {
				return nil, err
			}
		}
		al = append(al, types.AccessTuple{Address: addr, StorageKeys: hashes})
	}
	return al, nil
}

// scanObject reads raw as a JSON object. It returns nil, nil when raw is not an object. Each
// key is passed to check in the order of the object, and a key given twice is rejected, so
// that no member is silently dropped. prefix is prepended to keys in messages.
func scanObject(raw json.RawMessage, prefix string, check func(key string) error) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil
	}
	obj := object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonrpc.ErrInvalidParams.With("malformed transaction object")
		}
		key, _ := tok.(string) // an object key is always a string
		if err := check(key); err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, jsonrpc.ErrInvalidParams.With("malformed transaction object")
		}
		if _, dup := obj[key]; dup {
			return nil, jsonrpc.ErrInvalidParams.Withf("duplicate field %s", quoteKey(prefix+key))
		}
		obj[key] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, jsonrpc.ErrInvalidParams.With("malformed transaction object")
	}
	return obj, nil
}

// quoteKey quotes a client-supplied key for a message, cut to a readable length.
func quoteKey(key string) string {
	const max = 64
	if len(key) > max {
		key = key[:max] + "..."
	}
	return strconv.Quote(key)
}
