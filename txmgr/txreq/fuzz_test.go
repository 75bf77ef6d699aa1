package txreq

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// FuzzParse feeds arbitrary params to Parse. It must never panic; it returns exactly one of a
// request and a -32602 error; an accepted request is well formed, builds a transaction that
// encodes and decodes to the same hash, and survives MarshalJSON and Parse unchanged.
func FuzzParse(f *testing.F) {
	al := `[{"address":"` + toHex + `","storageKeys":["0x000000000000000000000000000000000000000000000000000000000000002a"]}]`
	for _, s := range []string{
		legacy(), dynamic(),
		legacy("chainId", `"0x89"`, "type", `"0x0"`, "input", `"0x00"`, "data", `"0x00"`),
		dynamic("accessList", al, "type", `"0x2"`, "data", `"0xa9059cbb"`),
		legacy("nonce", `"0x1"`), legacy("gasprice", `"0x1"`), legacy("to", "null"),
		legacy("value", `"0x1`+ff(64)+`"`), dynamic("maxPriorityFeePerGas", `"0xffffffffff"`),
		`[{"gas":"0x1","gas":"0x2"}]`, `[]`, `[1]`, `{}`, ``,
	} {
		f.Add([]byte(s), uint64(polygon))
	}
	f.Add([]byte(dynamic("chainId", `"0x1"`)), uint64(1))
	f.Fuzz(func(t *testing.T, params []byte, chainID uint64) {
		r, err := Parse(params, chainID)
		if (r == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of a request and an error", r, err)
		}
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) || !errors.Is(err, jsonrpc.ErrInvalidParams) || je.Code != -32602 || je.Message == "" {
				t.Fatalf("Parse error %v (%T) is not a -32602 with a message", err, err)
			}
			return
		}
		if r.To == nil || r.Value == nil || r.Data == nil || (r.GasPrice == nil) == (r.MaxFeePerGas == nil) ||
			(r.MaxFeePerGas == nil) != (r.MaxPriorityFeePerGas == nil) ||
			(r.MaxFeePerGas != nil && r.MaxPriorityFeePerGas.Cmp(r.MaxFeePerGas) > 0) ||
			(r.ChainID != nil && (!r.ChainID.IsUint64() || r.ChainID.Uint64() != chainID)) ||
			(r.AccessList != nil && r.GasPrice != nil) {
			t.Fatalf("accepted a malformed request %+v", r)
		}
		for _, v := range []*big.Int{r.Value, r.GasPrice, r.MaxFeePerGas, r.MaxPriorityFeePerGas} {
			if v != nil && (v.Sign() < 0 || v.BitLen() > 256) {
				t.Fatalf("accepted a quantity %v outside 0 .. 2^256-1", v)
			}
		}

		cid := new(big.Int).SetUint64(chainID)
		tx := r.Tx(3, cid)
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var back types.Transaction
		if err := back.UnmarshalBinary(raw); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if back.Hash() != tx.Hash() || back.Type() != r.Type() || back.Gas() != r.Gas || *back.To() != *r.To ||
			back.Value().Cmp(r.Value) != 0 || !bytes.Equal(back.Data(), r.Data) {
			t.Fatalf("transaction changed through its encoding")
		}
		if tx.Cost().Cmp(r.MaxCost()) != 0 {
			t.Fatalf("tx.Cost() = %v, MaxCost() = %v", tx.Cost(), r.MaxCost())
		}
		if err := CheckGas(r, 30_000_000, 0); err != nil && !errors.Is(err, ErrGas) {
			t.Fatalf("CheckGas error %v is not ErrGas", err)
		}

		j, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		again, err := Parse([]byte("["+string(j)+"]"), chainID)
		if err != nil {
			t.Fatalf("Parse(MarshalJSON() = %s) = %v", j, err)
		}
		if d := diff(again, r); d != "" {
			t.Fatalf("Parse(MarshalJSON()): %s", d)
		}
		if again.Tx(3, cid).Hash() != tx.Hash() {
			t.Fatal("the transaction changed through MarshalJSON and Parse")
		}
	})
}

// FuzzParseFill feeds arbitrary params to ParseFill. It must never panic; it returns exactly
// one of a request and a -32602 error; what it reports missing is unset and what it does not
// is set; a creation carries init code; completed with stand-in values, the request builds a
// transaction and survives MarshalJSON and ParseFill unchanged (its nonce included).
func FuzzParseFill(f *testing.F) {
	from := `"from":"` + toHex + `"`
	for _, s := range []string{
		legacy(), dynamic(), legacy("nonce", `"0x1"`), `[{` + from + `}]`, `[{` + from + `,"to":null,"data":"0x6000"}]`,
		`[{` + from + `,"data":"0x"}]`, `[{` + from + `,"maxFeePerGas":"0x10","type":"0x2","hardfork":"london"}]`,
		`[{` + from + `,"type":"0x0","gasLimit":"0x5208","input":"0x00"}]`, `[{` + from + `,"gasprice":"0x1"}]`,
		`[{` + from + `,"blobVersionedHashes":[]}]`, `[{` + from + `,"gas":"0x1","gasLimit":"0x2"}]`, `[]`, `{}`, ``,
	} {
		f.Add([]byte(s), uint64(polygon))
	}
	f.Fuzz(func(t *testing.T, params []byte, chainID uint64) {
		r, err := ParseFill(params, chainID)
		if (r == nil) == (err == nil) {
			t.Fatalf("ParseFill = %v, %v: want exactly one of a request and an error", r, err)
		}
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32602 || je.Message == "" {
				t.Fatalf("ParseFill error %v (%T) is not a -32602 with a message", err, err)
			}
			return
		}
		for _, c := range []struct {
			f     Field
			unset bool
		}{
			{FieldGasPrice, r.GasPrice == nil}, {FieldMaxFeePerGas, r.MaxFeePerGas == nil},
			{FieldMaxPriorityFeePerGas, r.MaxPriorityFeePerGas == nil}, {FieldValue, r.Value == nil},
		} {
			if r.Missing.Has(c.f) && !c.unset {
				t.Fatalf("%v reported missing and set: %+v", c.f.Names(), r)
			}
		}
		if (r.To == nil && len(r.Data) == 0) || (r.GasPrice != nil && (r.MaxFeePerGas != nil || r.MaxPriorityFeePerGas != nil)) ||
			(r.ChainID != nil && (!r.ChainID.IsUint64() || r.ChainID.Uint64() != chainID)) {
			t.Fatalf("accepted a malformed request %+v", r)
		}
		// Complete it as the nonce manager would, never touching what was given.
		if r.Missing.Has(FieldGas) {
			r.Gas = 100000
		}
		if r.Value == nil {
			r.Value = new(big.Int)
		}
		if r.Data == nil {
			r.Data = []byte{}
		}
		if r.GasPrice == nil {
			if r.MaxFeePerGas == nil {
				r.MaxFeePerGas = big.NewInt(1e9)
			}
			if r.MaxPriorityFeePerGas == nil {
				r.MaxPriorityFeePerGas = new(big.Int)
			}
		}
		r.Missing = 0
		cid := new(big.Int).SetUint64(chainID)
		tx := r.Tx(3, cid)
		if _, err := tx.MarshalBinary(); err != nil {
			t.Fatalf("encode: %v", err)
		}
		j, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		again, err := ParseFill([]byte("["+string(j)+"]"), chainID)
		if err != nil {
			t.Fatalf("ParseFill(MarshalJSON() = %s) = %v", j, err)
		}
		if d := diff(again, r); d != "" || again.Missing != 0 || (again.Nonce == nil) != (r.Nonce == nil) ||
			r.Nonce != nil && *again.Nonce != *r.Nonce {
			t.Fatalf("ParseFill(MarshalJSON()): %s (missing %v, nonce %v)", d, again.Missing.Names(), again.Nonce)
		}
	})
}
