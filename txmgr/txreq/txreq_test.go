package txreq

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

const polygon = 137

func TestParseValid(t *testing.T) {
	al := types.AccessList{{
		Address:     toAddr,
		StorageKeys: []common.Hash{common.HexToHash("0x01"), common.HexToHash("0xff")},
	}}
	alJSON := `[{"address":"` + toHex + `","storageKeys":["0x0000000000000000000000000000000000000000000000000000000000000001","0x00000000000000000000000000000000000000000000000000000000000000FF"]}]`
	max256 := "0x" + strings.Repeat("f", 64)

	tests := []struct {
		name   string
		params string
		chain  uint64
		want   *Request
	}{
		{"legacy", legacy(), polygon, wantLegacy(nil)},
		{"eip-1559", dynamic(), polygon, wantDynamic(nil)},
		{"data with bytes", legacy("data", `"0xa9059cbb00"`), polygon,
			wantLegacy(func(r *Request) { r.Data = []byte{0xa9, 0x05, 0x9c, 0xbb, 0x00} })},
		{"upper-case data digits", legacy("data", `"0xA9059CBB"`), polygon,
			wantLegacy(func(r *Request) { r.Data = []byte{0xa9, 0x05, 0x9c, 0xbb} })},
		{"input instead of data", legacy("data", "-", "input", `"0xabcd"`), polygon,
			wantLegacy(func(r *Request) { r.Data = []byte{0xab, 0xcd} })},
		{"data and input equal, different case", legacy("data", `"0xabcd"`, "input", `"0xABCD"`), polygon,
			wantLegacy(func(r *Request) { r.Data = []byte{0xab, 0xcd} })},
		{"data null, input given", legacy("data", "null", "input", `"0x01"`), polygon,
			wantLegacy(func(r *Request) { r.Data = []byte{1} })},
		{"leading zeros", legacy("gas", `"0x005208"`, "value", `"0x01"`, "gasPrice", `"0x00"`), polygon,
			wantLegacy(func(r *Request) { r.Value = big.NewInt(1); r.GasPrice = new(big.Int) })},
		{"0X prefix and upper-case digits", legacy("gas", `"0X5208"`, "value", `"0XDE0B6B3A7640000"`), polygon, wantLegacy(nil)},
		{"gas price zero", legacy("gasPrice", `"0x0"`), polygon,
			wantLegacy(func(r *Request) { r.GasPrice = new(big.Int) })},
		{"value zero", legacy("value", `"0x0"`), polygon,
			wantLegacy(func(r *Request) { r.Value = new(big.Int) })},
		{"value of 256 bits", legacy("value", `"`+max256+`"`), polygon,
			wantLegacy(func(r *Request) { r.Value = big10(max256) })},
		{"value of 256 bits after leading zeros", legacy("value", `"0x000`+max256[2:]+`"`), polygon,
			wantLegacy(func(r *Request) { r.Value = big10(max256) })},
		{"gas of 64 bits", legacy("gas", `"0xffffffffffffffff"`), polygon,
			wantLegacy(func(r *Request) { r.Gas = 1<<64 - 1 })},
		{"lower-case addresses", legacy("from", `"`+strings.ToLower(fromHex)+`"`, "to", `"`+strings.ToLower(toHex)+`"`), polygon, wantLegacy(nil)},
		{"upper-case address digits", legacy("from", `"0x`+strings.ToUpper(fromHex[2:])+`"`), polygon, wantLegacy(nil)},
		{"chainId of the path", legacy("chainId", `"0x89"`), polygon,
			wantLegacy(func(r *Request) { r.ChainID = big.NewInt(137) })},
		{"chainId with leading zeros", dynamic("chainId", `"0x0001"`), 1,
			wantDynamic(func(r *Request) { r.ChainID = big.NewInt(1) })},
		{"chainId null", legacy("chainId", "null"), polygon, wantLegacy(nil)},
		{"type 0x0 with gasPrice", legacy("type", `"0x0"`), polygon, wantLegacy(nil)},
		{"type 0x00 with gasPrice", legacy("type", `"0x00"`), polygon, wantLegacy(nil)},
		{"type 0x2 with fee caps", dynamic("type", `"0x2"`), polygon, wantDynamic(nil)},
		{"type null", dynamic("type", "null"), polygon, wantDynamic(nil)},
		{"gasPrice null with fee caps", dynamic("gasPrice", "null"), polygon, wantDynamic(nil)},
		{"fee caps null with gasPrice", legacy("maxFeePerGas", "null", "maxPriorityFeePerGas", "null"), polygon, wantLegacy(nil)},
		{"priority fee equal to max fee", dynamic("maxPriorityFeePerGas", `"0x77359400"`), polygon,
			wantDynamic(func(r *Request) { r.MaxPriorityFeePerGas = big.NewInt(2_000_000_000) })},
		{"zero fees", dynamic("maxFeePerGas", `"0x0"`, "maxPriorityFeePerGas", `"0x0"`), polygon,
			wantDynamic(func(r *Request) { r.MaxFeePerGas = new(big.Int); r.MaxPriorityFeePerGas = new(big.Int) })},
		{"access list", dynamic("accessList", alJSON), polygon,
			wantDynamic(func(r *Request) { r.AccessList = al })},
		{"empty access list", dynamic("accessList", `[]`), polygon,
			wantDynamic(func(r *Request) { r.AccessList = types.AccessList{} })},
		{"access list without keys", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":[]}]`), polygon,
			wantDynamic(func(r *Request) {
				r.AccessList = types.AccessList{{Address: toAddr, StorageKeys: []common.Hash{}}}
			})},
		{"access list null with gasPrice", legacy("accessList", "null"), polygon, wantLegacy(nil)},
		{"every optional field", dynamic("type", `"0x2"`, "chainId", `"0x89"`, "accessList", alJSON, "input", `"0x"`), polygon,
			wantDynamic(func(r *Request) { r.ChainID = big.NewInt(137); r.AccessList = al })},
		{"whitespace", " [ { \"from\" : \"" + fromHex + "\" ,\n\"to\":\"" + toHex + "\",\t\"gas\":\"0x5208\",\"gasPrice\":\"0x3b9aca00\",\"value\":\"0xde0b6b3a7640000\",\"data\":\"0x\" } ] ",
			polygon, wantLegacy(nil)},
		{"escaped key", `[{"from":"` + fromHex + `","t\u006f":"` + toHex + `","gas":"0x5208","gasPrice":"0x3b9aca00","value":"0xde0b6b3a7640000","data":"0x"}]`,
			polygon, wantLegacy(nil)},
		{"ethers v6 shape", `[{"from":"` + strings.ToLower(fromHex) + `","to":"` + toHex + `","gas":"0x5208","maxFeePerGas":"0x77359400","maxPriorityFeePerGas":"0x3b9aca00","value":"0xde0b6b3a7640000","data":"0x","type":"0x2","chainId":"0x89"}]`,
			polygon, wantDynamic(func(r *Request) { r.ChainID = big.NewInt(137) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.params), tt.chain)
			if err != nil {
				t.Fatalf("Parse(%s) = %v", tt.params, err)
			}
			if d := diff(got, tt.want); d != "" {
				t.Errorf("Parse(%s): %s", tt.params, d)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	badSum := "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed" // one letter lower-cased
	key := func(s string) string { return `"0x` + s + `"` }

	tests := []struct {
		name   string
		params string
		chain  uint64
		msg    string
	}{
		// the params array
		{"params an object", `{"from":"` + fromHex + `"}`, polygon, "params must be an array"},
		{"params a string", `"0x"`, polygon, "params must be an array"},
		{"params malformed", `[{`, polygon, "params must be an array"},
		{"params left out", ``, polygon, "expected 1 param, got 0"},
		{"params null", `null`, polygon, "expected 1 param, got 0"},
		{"no params", `[]`, polygon, "expected 1 param, got 0"},
		{"two params", `[{}, "latest"]`, polygon, "expected 1 param, got 2"},
		{"param a number", `[1]`, polygon, "params[0] must be a transaction object"},
		{"param a string", `["0x1234"]`, polygon, "params[0] must be a transaction object"},
		{"param null", `[null]`, polygon, "params[0] must be a transaction object"},
		{"param an array", `[[]]`, polygon, "params[0] must be a transaction object"},

		// keys
		{"nonce", legacy("nonce", `"0x1"`), polygon, "nonce must be omitted: the service supplies it"},
		{"nonce null", legacy("nonce", "null"), polygon, "nonce must be omitted: the service supplies it"},
		{"nonce a number", dynamic("nonce", "0"), polygon, "nonce must be omitted: the service supplies it"},
		{"nonce in an empty object", `[{"nonce":"0x0"}]`, polygon, "nonce must be omitted: the service supplies it"},
		{"gasprice misspelt", legacy("gasPrice", "-", "gasprice", `"0x1"`), polygon, `unknown field "gasprice"`},
		{"gasLimit", legacy("gasLimit", `"0x5208"`), polygon, `unknown field "gasLimit"`},
		{"blob fee", dynamic("maxFeePerBlobGas", `"0x1"`), polygon, `unknown field "maxFeePerBlobGas"`},
		{"authorization list", dynamic("authorizationList", `[]`), polygon, `unknown field "authorizationList"`},
		{"unknown key before nonce", legacy("foo", "1", "nonce", `"0x1"`), polygon, `unknown field "foo"`},
		{"unknown key, long", legacy(strings.Repeat("k", 100), "1"), polygon, `unknown field "` + strings.Repeat("k", 64) + `..."`},
		{"duplicate key", `[{"gas":"0x5208","gas":"0x5209"}]`, polygon, `duplicate field "gas"`},
		{"duplicate key through escape", `[{"gas":"0x5208","g\u0061s":"0x5208"}]`, polygon, `duplicate field "gas"`},

		// required fields
		{"empty object", `[{}]`, polygon, "missing field: from"},
		{"from missing", legacy("from", "-"), polygon, "missing field: from"},
		{"from null", legacy("from", "null"), polygon, "missing field: from"},
		{"to missing", legacy("to", "-"), polygon, "missing field: to"},
		{"to null: contract creation", legacy("to", "null", "data", `"0x6080"`), polygon, "to is required"},
		{"gas missing", legacy("gas", "-"), polygon, "missing field: gas"},
		{"gas null", legacy("gas", "null"), polygon, "missing field: gas"},
		{"no fee field", legacy("gasPrice", "-"), polygon, "missing field: gasPrice (or maxFeePerGas and maxPriorityFeePerGas)"},
		{"only maxFeePerGas", dynamic("maxPriorityFeePerGas", "-"), polygon, "missing field: maxPriorityFeePerGas"},
		{"only maxPriorityFeePerGas", dynamic("maxFeePerGas", "-"), polygon, "missing field: maxFeePerGas"},
		{"maxPriorityFeePerGas null", dynamic("maxPriorityFeePerGas", "null"), polygon, "missing field: maxPriorityFeePerGas"},
		{"value missing", legacy("value", "-"), polygon, "missing field: value"},
		{"data missing", legacy("data", "-"), polygon, "missing field: data"},
		{"data and input null", legacy("data", "null", "input", "null"), polygon, "missing field: data"},
		{"first failure in field order", legacy("from", `"0x1"`, "gas", `"x"`), polygon, "from must be a 0x-prefixed 20-byte hex address"},
		{"missing before malformed later", legacy("to", "-", "value", "1"), polygon, "missing field: to"},

		// fee combinations
		{"gasPrice with maxFeePerGas", legacy("maxFeePerGas", `"0x1"`), polygon, "gasPrice cannot be combined with maxFeePerGas or maxPriorityFeePerGas"},
		{"gasPrice with maxPriorityFeePerGas", legacy("maxPriorityFeePerGas", `"0x1"`), polygon, "gasPrice cannot be combined with maxFeePerGas or maxPriorityFeePerGas"},
		{"gasPrice with both fee caps", dynamic("gasPrice", `"0x1"`), polygon, "gasPrice cannot be combined with maxFeePerGas or maxPriorityFeePerGas"},
		{"priority fee above max fee", dynamic("maxPriorityFeePerGas", `"0x77359401"`), polygon, "maxPriorityFeePerGas 0x77359401 exceeds maxFeePerGas 0x77359400"},

		// quantities
		{"gas a JSON number", legacy("gas", "21000"), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas decimal", legacy("gas", `"21000"`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas 0x alone", legacy("gas", `"0x"`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas empty", legacy("gas", `""`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas not hex", legacy("gas", `"0x52g8"`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas without prefix", legacy("gas", `"5208"`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas with a space", legacy("gas", `" 0x5208"`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas a bool", legacy("gas", "true"), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas an object", legacy("gas", `{"hex":"0x1"}`), polygon, "gas must be a 0x-prefixed hex quantity"},
		{"gas overflows", legacy("gas", `"0x10000000000000000"`), polygon, "gas overflows 64 bits"},
		{"gasPrice decimal", legacy("gasPrice", `"1000000000"`), polygon, "gasPrice must be a 0x-prefixed hex quantity"},
		{"gasPrice negative", legacy("gasPrice", `"-0x1"`), polygon, "gasPrice must be a 0x-prefixed hex quantity"},
		{"gasPrice overflows", legacy("gasPrice", `"0x1`+strings.Repeat("0", 64)+`"`), polygon, "gasPrice overflows 256 bits"},
		{"maxFeePerGas a number", dynamic("maxFeePerGas", "2000000000"), polygon, "maxFeePerGas must be a 0x-prefixed hex quantity"},
		{"maxFeePerGas overflows", dynamic("maxFeePerGas", `"0x1`+strings.Repeat("0", 64)+`"`), polygon, "maxFeePerGas overflows 256 bits"},
		{"maxPriorityFeePerGas 0x alone", dynamic("maxPriorityFeePerGas", `"0x"`), polygon, "maxPriorityFeePerGas must be a 0x-prefixed hex quantity"},
		{"value a JSON number", legacy("value", "1"), polygon, "value must be a 0x-prefixed hex quantity"},
		{"value a float", legacy("value", "1e18"), polygon, "value must be a 0x-prefixed hex quantity"},
		{"value decimal", legacy("value", `"1000000000000000000"`), polygon, "value must be a 0x-prefixed hex quantity"},
		{"value overflows", legacy("value", `"0x1`+strings.Repeat("0", 64)+`"`), polygon, "value overflows 256 bits"},

		// data
		{"data odd length", legacy("data", `"0xabc"`), polygon, "data must be 0x-prefixed hex with an even number of digits"},
		{"data without prefix", legacy("data", `"abcd"`), polygon, "data must be 0x-prefixed hex with an even number of digits"},
		{"data not hex", legacy("data", `"0xzz"`), polygon, "data must be 0x-prefixed hex with an even number of digits"},
		{"data a number", legacy("data", "0"), polygon, "data must be 0x-prefixed hex with an even number of digits"},
		{"data empty string", legacy("data", `""`), polygon, "data must be 0x-prefixed hex with an even number of digits"},
		{"input malformed", legacy("input", `"0x1"`), polygon, "input must be 0x-prefixed hex with an even number of digits"},
		{"data and input differ", legacy("data", `"0xabcd"`, "input", `"0xabce"`), polygon, "data and input differ: send one of them"},
		{"data empty, input not", legacy("input", `"0x00"`), polygon, "data and input differ: send one of them"},

		// addresses
		{"from too short", legacy("from", `"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeA"`), polygon, "from must be a 0x-prefixed 20-byte hex address"},
		{"from too long", legacy("from", `"`+fromHex+`00"`), polygon, "from must be a 0x-prefixed 20-byte hex address"},
		{"from without prefix", legacy("from", `"`+fromHex[2:]+`"`), polygon, "from must be a 0x-prefixed 20-byte hex address"},
		{"from not hex", legacy("from", `"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg"`), polygon, "from must be a 0x-prefixed 20-byte hex address"},
		{"from a number", legacy("from", "0"), polygon, "from must be a 0x-prefixed 20-byte hex address"},
		{"from fails EIP-55", legacy("from", `"`+badSum+`"`), polygon, "from fails its EIP-55 checksum"},
		{"to fails EIP-55", legacy("to", `"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d35A"`), polygon, "to fails its EIP-55 checksum"},
		{"to empty", legacy("to", `""`), polygon, "to must be a 0x-prefixed 20-byte hex address"},
		{"to 32 bytes", legacy("to", key(strings.Repeat("11", 32))), polygon, "to must be a 0x-prefixed 20-byte hex address"},

		// chainId
		{"chainId of another chain", legacy("chainId", `"0x1"`), polygon, "chainId 0x1 does not match the chain of the path (137)"},
		{"chainId leading zeros, other chain", dynamic("chainId", `"0x0089"`), 1, "chainId 0x89 does not match the chain of the path (1)"},
		{"chainId beyond 64 bits", legacy("chainId", `"0x10000000000000089"`), polygon, "chainId 0x10000000000000089 does not match the chain of the path (137)"},
		{"chainId decimal", legacy("chainId", `"137"`), polygon, "chainId must be a 0x-prefixed hex quantity"},
		{"chainId a number", legacy("chainId", "137"), polygon, "chainId must be a 0x-prefixed hex quantity"},
		{"chainId overflows", legacy("chainId", `"0x1`+strings.Repeat("0", 64)+`"`), polygon, "chainId overflows 256 bits"},

		// type
		{"type 0x1", legacy("type", `"0x1"`), polygon, "unsupported transaction type 0x1: use 0x0 (gasPrice) or 0x2 (maxFeePerGas and maxPriorityFeePerGas)"},
		{"type 0x3", dynamic("type", `"0x3"`), polygon, "unsupported transaction type 0x3: use 0x0 (gasPrice) or 0x2 (maxFeePerGas and maxPriorityFeePerGas)"},
		{"type 0x4", dynamic("type", `"0x04"`), polygon, "unsupported transaction type 0x4: use 0x0 (gasPrice) or 0x2 (maxFeePerGas and maxPriorityFeePerGas)"},
		{"type 0x0 with fee caps", dynamic("type", `"0x0"`), polygon, "type 0x0 requires gasPrice, not maxFeePerGas and maxPriorityFeePerGas"},
		{"type 0x2 with gasPrice", legacy("type", `"0x2"`), polygon, "type 0x2 requires maxFeePerGas and maxPriorityFeePerGas, not gasPrice"},
		{"type a number", dynamic("type", "2"), polygon, "type must be a 0x-prefixed hex quantity"},
		{"type a name", dynamic("type", `"eip1559"`), polygon, "type must be a 0x-prefixed hex quantity"},

		// accessList
		{"access list with gasPrice", legacy("accessList", `[]`), polygon, "accessList needs a type 0x2 transaction (maxFeePerGas and maxPriorityFeePerGas), not gasPrice"},
		{"access list an object", dynamic("accessList", `{}`), polygon, "accessList must be an array"},
		{"access list element a string", dynamic("accessList", `["`+toHex+`"]`), polygon, "accessList[0] must be an object"},
		{"access list address missing", dynamic("accessList", `[{"storageKeys":[]}]`), polygon, "missing field: accessList[0].address"},
		{"access list keys missing", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":[]},{"address":"`+toHex+`"}]`), polygon, "missing field: accessList[1].storageKeys"},
		{"access list keys null", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":null}]`), polygon, "missing field: accessList[0].storageKeys"},
		{"access list keys an object", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":{}}]`), polygon, "accessList[0].storageKeys must be an array"},
		{"access list address bad checksum", dynamic("accessList", `[{"address":"`+badSum+`","storageKeys":[]}]`), polygon, "accessList[0].address fails its EIP-55 checksum"},
		{"access list key short", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":["0x01"]}]`), polygon, "accessList[0].storageKeys[0] must be a 0x-prefixed 32-byte hex key"},
		{"access list key a number", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":[`+key(strings.Repeat("00", 32))+`,1]}]`), polygon, "accessList[0].storageKeys[1] must be a 0x-prefixed 32-byte hex key"},
		{"access list unknown field", dynamic("accessList", `[{"address":"`+toHex+`","storageKeys":[],"slots":[]}]`), polygon, `unknown field "accessList[0].slots"`},
		{"access list duplicate field", dynamic("accessList", `[{"address":"`+toHex+`","address":"`+toHex+`","storageKeys":[]}]`), polygon, `duplicate field "accessList[0].address"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.params), tt.chain)
			if r != nil {
				t.Errorf("Parse(%s) returned a request with the error", tt.params)
			}
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("Parse(%s) = %v (%T), want a *jsonrpc.Error", tt.params, err, err)
			}
			if !errors.Is(err, jsonrpc.ErrInvalidParams) || je.Code != -32602 || je.Status() != 200 {
				t.Errorf("Parse(%s) = code %d, HTTP %d, want -32602, 200 (ErrInvalidParams)", tt.params, je.Code, je.Status())
			}
			if je.Message != tt.msg {
				t.Errorf("Parse(%s)\n message %q\n want    %q", tt.params, je.Message, tt.msg)
			}
		})
	}
}
