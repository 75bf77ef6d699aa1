// Package txreq parses and validates the transaction object of eth_sendTransaction and
// eth_signTransaction, and checks the parts of it that need no chain state beyond the block gas
// limit. It does no I/O: the sign stage calls it with the call's params and the path's chain,
// then checks funds and signing rules with chain data of its own.
//
// Two forms are read. The strict form (Parse) is the interface description's: every field of
// the object except nonce, which must be left out because the service supplies it:
//
//	{"from", "to", "gas", "value", "data", and "gasPrice" (legacy, type 0x0)
//	 or "maxFeePerGas" and "maxPriorityFeePerGas" (EIP-1559, type 0x2)}
//
// Optional: "chainId" (must equal the path's chain), "type" ("0x0" or "0x2", matching the fee
// fields), "accessList" (type 0x2 only) and "input" as an alias of "data". Anything else is
// rejected by name, so that a misspelt field ("gasprice") does not silently vanish.
//
// The form real clients send (ParseFill), as geth and anvil read eth_sendTransaction: only
// "from" is required. "gas", the fees, "value" and "data" may be left out, for the caller to
// fill (Request.Missing says which); "to" absent or null with non-empty data creates a
// contract; an explicit "nonce" is read (the nonce manager accepts it only when it is the
// account's next one); "gasLimit" is an alias of "gas". Members that carry nothing for a
// transaction of type 0 or 2 (web3.js's "hardfork", "chain", "common", "networkId") are
// ignored, as geth ignores unknown members, except that a member differing from a known one
// only in case ("gasprice") is still refused by name, and blob and set-code members (types 3
// and 4) are refused as unsupported.
//
// Every error is a *jsonrpc.Error: -32602 naming the field for a malformed object (Parse), and
// -32000 with the reason for a gas limit the chain would refuse (CheckGas, ErrGas).
package txreq

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Request is a validated eth_sendTransaction / eth_signTransaction transaction object.
// Once complete (Missing is 0), exactly one of GasPrice (a legacy, type 0 transaction, signed
// with EIP-155) and the pair MaxFeePerGas, MaxPriorityFeePerGas (an EIP-1559, type 2
// transaction) is set.
type Request struct {
	From common.Address
	To   *common.Address // nil: contract creation (ParseFill only; Data is then not empty)
	Gas  uint64
	// Value and the fees are non-negative and fit 256 bits.
	Value *big.Int
	Data  []byte

	GasPrice *big.Int // legacy (type 0), EIP-155 signed

	MaxFeePerGas         *big.Int // EIP-1559 (type 2), instead of GasPrice
	MaxPriorityFeePerGas *big.Int // EIP-1559 (type 2), <= MaxFeePerGas

	ChainID    *big.Int         // as given (equal to the path's chain), or nil
	AccessList types.AccessList // type 2 only; nil when not given

	// Nonce is the client's explicit nonce (ParseFill only), or nil.
	Nonce *uint64
	// Missing are the fields the client left out (ParseFill only), for the caller to fill;
	// Filled those the caller filled in (it clears them from Missing).
	Missing, Filled Field
	// WantType is the type the client asked for with "type" when it gave no fee field to say
	// so: types.LegacyTxType or types.DynamicFeeTxType; -1 when it did not ask.
	WantType int
}

// Field is a set of transaction fields a client may leave out.
type Field uint8

// The fields ParseFill lets a client leave out. A partly given fee pair is missing only the
// member left out.
const (
	FieldGas Field = 1 << iota
	FieldGasPrice
	FieldMaxFeePerGas
	FieldMaxPriorityFeePerGas
	FieldValue
	FieldData
)

var fieldNames = []struct {
	f    Field
	name string
}{
	{FieldGas, "gas"}, {FieldGasPrice, "gasPrice"}, {FieldMaxFeePerGas, "maxFeePerGas"},
	{FieldMaxPriorityFeePerGas, "maxPriorityFeePerGas"}, {FieldValue, "value"}, {FieldData, "data"},
}

// Names lists the fields of f by their JSON names, in a fixed order.
func (f Field) Names() []string {
	var out []string
	for _, n := range fieldNames {
		if f&n.f != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Has reports whether every field of g is in f.
func (f Field) Has(g Field) bool { return f&g == g }

// Fees are the fee fields.
const Fees = FieldGasPrice | FieldMaxFeePerGas | FieldMaxPriorityFeePerGas

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

// knownFill is known for ParseFill, which also reads nonce and the alias gasLimit.
func knownFill(key string) bool { return known(key) || key == "nonce" || key == "gasLimit" }

// unsupported are members of transaction types web3gate does not sign (blob transactions,
// type 3, and set-code transactions, type 4): refused by name rather than ignored, since
// leaving them out would sign a different transaction from the one asked for.
func unsupported(key string) bool {
	switch key {
	case "blobVersionedHashes", "maxFeePerBlobGas", "blobs", "sidecars", "kzgCommitments", "kzgProofs",
		"authorizationList":
		return true
	}
	return false
}

// misspelt reports whether key differs only in case from a member ParseFill reads, such as
// "gasprice": a typo that ignoring would turn into a silently filled field.
func misspelt(key string) bool {
	for _, k := range []string{"from", "to", "gas", "gasLimit", "value", "data", "input", "gasPrice",
		"maxFeePerGas", "maxPriorityFeePerGas", "chainId", "type", "accessList", "nonce"} {
		if key != k && strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// Parse decodes params, the raw JSON array of an eth_sendTransaction or eth_signTransaction
// call, for the chain chainID, in the strict form: exactly one transaction object with every
// field but nonce. Fields are checked in a fixed order (the object's keys, then from, to, gas,
// the fees, value, data, chainId, type, accessList), and the first failure is returned as
// -32602 naming the field.
func Parse(params []byte, chainID uint64) (*Request, error) { return parse(params, chainID, false) }

// ParseFill decodes params like Parse, in the form real clients send: the fields a client
// may leave out are recorded in Request.Missing, an explicit nonce in Request.Nonce, and a
// null or absent "to" with data is a contract creation. The caller fills the rest and checks
// the complete request (CheckGas, fees, funds) as for Parse.
func ParseFill(params []byte, chainID uint64) (*Request, error) { return parse(params, chainID, true) }

func parse(params []byte, chainID uint64, fill bool) (*Request, error) {
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
		switch {
		case fill && knownFill(key):
			return nil
		case fill && unsupported(key):
			return jsonrpc.ErrInvalidParams.Withf("%s: blob (type 3) and set-code (type 4) transactions are not supported", quoteKey(key))
		case fill && misspelt(key):
			return jsonrpc.ErrInvalidParams.Withf("unknown field %s", quoteKey(key))
		case fill:
			return errIgnore
		case key == "nonce":
			return jsonrpc.ErrInvalidParams.With("nonce must be omitted: the service supplies it")
		case !known(key):
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
	if fill {
		return obj.fillRequest(chainID)
	}
	return obj.request(chainID)
}

// errIgnore, from a scanObject check, drops the member.
var errIgnore = errors.New("ignore member")

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

func (o object) request(chainID uint64) (*Request, error) { return o.build(chainID, false) }

func (o object) fillRequest(chainID uint64) (*Request, error) { return o.build(chainID, true) }

// build reads the members in a fixed order; fill is ParseFill's form.
func (o object) build(chainID uint64, fill bool) (*Request, error) {
	r := &Request{WantType: -1}
	var err error

	raw, ok := o.get("from")
	if !ok {
		return nil, missing("from")
	}
	if r.From, err = address(raw, "from"); err != nil {
		return nil, err
	}

	if raw, present := o["to"]; !fill && !present {
		return nil, missing("to")
	} else if !fill && isNull(raw) {
		return nil, jsonrpc.ErrInvalidParams.With("to is required")
	}
	if raw, ok := o.get("to"); ok {
		to, err := address(raw, "to")
		if err != nil {
			return nil, err
		}
		r.To = &to
	}

	if err := o.gas(r, fill); err != nil {
		return nil, err
	}

	if err := o.fees(r, fill); err != nil {
		return nil, err
	}

	raw, ok = o.get("value")
	switch {
	case ok:
		if r.Value, err = quantity(raw, "value", 256); err != nil {
			return nil, err
		}
	case fill:
		r.Missing |= FieldValue
	default:
		return nil, missing("value")
	}

	if r.Data, err = o.data(); err != nil {
		if !fill || !errors.Is(err, errNoData) {
			return nil, err
		}
		r.Missing |= FieldData
	}
	if r.To == nil && len(r.Data) == 0 {
		return nil, jsonrpc.ErrInvalidParams.With("to is null or absent and data is empty: a contract creation needs its init code in data (input)")
	}

	if raw, ok := o.get("nonce"); ok { // ParseFill only: Parse refused the key
		n, err := quantity(raw, "nonce", 64)
		if err != nil {
			return nil, err
		}
		v := n.Uint64()
		r.Nonce = &v
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
		dynamic := r.MaxFeePerGas != nil || r.MaxPriorityFeePerGas != nil
		switch {
		case t.Sign() != 0 && (!t.IsUint64() || t.Uint64() != types.DynamicFeeTxType):
			return nil, jsonrpc.ErrInvalidParams.Withf("unsupported transaction type %s: use 0x0 (gasPrice) or 0x2 (maxFeePerGas and maxPriorityFeePerGas)",
				hexutil.EncodeBig(t))
		case t.Sign() == 0 && dynamic:
			return nil, jsonrpc.ErrInvalidParams.With("type 0x0 requires gasPrice, not maxFeePerGas and maxPriorityFeePerGas")
		case t.Sign() != 0 && r.GasPrice != nil:
			return nil, jsonrpc.ErrInvalidParams.With("type 0x2 requires maxFeePerGas and maxPriorityFeePerGas, not gasPrice")
		case r.Missing.Has(Fees):
			r.WantType = int(t.Uint64()) // no fee given: the type says which to fill
		}
	}

	if raw, ok := o.get("accessList"); ok {
		if r.GasPrice != nil || r.WantType == types.LegacyTxType {
			return nil, jsonrpc.ErrInvalidParams.With("accessList needs a type 0x2 transaction (maxFeePerGas and maxPriorityFeePerGas), not gasPrice")
		}
		if r.AccessList, err = accessList(raw); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// gas reads gas, or its alias gasLimit (ParseFill only); when both are given they must be
// equal.
func (o object) gas(r *Request, fill bool) error {
	graw, hasGas := o.get("gas")
	lraw, hasLimit := o.get("gasLimit") // only ParseFill lets the key through
	var g, l *big.Int
	var err error
	if hasGas {
		if g, err = quantity(graw, "gas", 64); err != nil {
			return err
		}
	}
	if hasLimit {
		if l, err = quantity(lraw, "gasLimit", 64); err != nil {
			return err
		}
	}
	switch {
	case hasGas && hasLimit && g.Cmp(l) != 0:
		return jsonrpc.ErrInvalidParams.With("gas and gasLimit differ: send one of them")
	case hasGas:
		r.Gas = g.Uint64()
	case hasLimit:
		r.Gas = l.Uint64()
	case fill:
		r.Missing |= FieldGas
	default:
		return missing("gas")
	}
	return nil
}

// fees reads either gasPrice or the EIP-1559 fields. With fill, fee fields left out are
// recorded as missing: all three when none is given, else the member of the pair left out.
func (o object) fees(r *Request, fill bool) error {
	gp, hasGP := o.get("gasPrice")
	mf, hasMF := o.get("maxFeePerGas")
	mp, hasMP := o.get("maxPriorityFeePerGas")
	var err error
	switch {
	case hasGP && (hasMF || hasMP):
		return jsonrpc.ErrInvalidParams.With("gasPrice cannot be combined with maxFeePerGas or maxPriorityFeePerGas")
	case hasGP:
		r.GasPrice, err = quantity(gp, "gasPrice", 256)
		return err
	case !hasMF && !hasMP && fill:
		r.Missing |= Fees
		return nil
	case !hasMF && !hasMP:
		return missing("gasPrice (or maxFeePerGas and maxPriorityFeePerGas)")
	case !hasMF && !fill:
		return missing("maxFeePerGas")
	case !hasMP && !fill:
		return missing("maxPriorityFeePerGas")
	}
	if hasMF {
		if r.MaxFeePerGas, err = quantity(mf, "maxFeePerGas", 256); err != nil {
			return err
		}
	} else {
		r.Missing |= FieldMaxFeePerGas
	}
	if hasMP {
		if r.MaxPriorityFeePerGas, err = quantity(mp, "maxPriorityFeePerGas", 256); err != nil {
			return err
		}
	} else {
		r.Missing |= FieldMaxPriorityFeePerGas
	}
	if hasMF && hasMP && r.MaxPriorityFeePerGas.Cmp(r.MaxFeePerGas) > 0 {
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
	return nil, errNoData
}

// errNoData: neither data nor input was given.
var errNoData = missing("data")

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
		err = check(key)
		if err != nil && err != errIgnore {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, jsonrpc.ErrInvalidParams.With("malformed transaction object")
		}
		if err == errIgnore {
			continue
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
