package txreq

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// EIP-55's own examples, so that the mixed case is a valid checksum.
const (
	fromHex = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	toHex   = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
)

var (
	fromAddr = common.HexToAddress(fromHex)
	toAddr   = common.HexToAddress(toHex)
)

type field struct{ key, raw string }

var (
	legacyBase = []field{
		{"from", `"` + fromHex + `"`},
		{"to", `"` + toHex + `"`},
		{"gas", `"0x5208"`},
		{"gasPrice", `"0x3b9aca00"`},
		{"value", `"0xde0b6b3a7640000"`},
		{"data", `"0x"`},
	}
	dynamicBase = []field{
		{"from", `"` + fromHex + `"`},
		{"to", `"` + toHex + `"`},
		{"gas", `"0x5208"`},
		{"maxFeePerGas", `"0x77359400"`},
		{"maxPriorityFeePerGas", `"0x3b9aca00"`},
		{"value", `"0xde0b6b3a7640000"`},
		{"data", `"0x"`},
	}
)

// legacy is the params array holding the base legacy object with kv applied: pairs of a key
// and its raw JSON value, "-" to remove the key; keys not in the base are appended in order.
func legacy(kv ...string) string { return build(legacyBase, kv) }

// dynamic is legacy for the base EIP-1559 object.
func dynamic(kv ...string) string { return build(dynamicBase, kv) }

func build(base []field, kv []string) string {
	if len(kv)%2 != 0 {
		panic("odd key/value list")
	}
	fs := append([]field(nil), base...)
next:
	for i := 0; i < len(kv); i += 2 {
		for j := range fs {
			if fs[j].key == kv[i] {
				fs[j].raw = kv[i+1]
				continue next
			}
		}
		fs = append(fs, field{kv[i], kv[i+1]})
	}
	var b strings.Builder
	b.WriteString("[{")
	first := true
	for _, f := range fs {
		if f.raw == "-" {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(&b, "%q:%s", f.key, f.raw)
	}
	b.WriteString("}]")
	return b.String()
}

func big10(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 0)
	if !ok {
		panic("bad number " + s)
	}
	return v
}

// wantLegacy is the Request of the base legacy object, changed by mod.
func wantLegacy(mod func(r *Request)) *Request {
	to := toAddr
	r := &Request{
		From: fromAddr, To: &to, Gas: 21000,
		GasPrice: big.NewInt(1_000_000_000),
		Value:    big10("1000000000000000000"),
		Data:     []byte{},
	}
	if mod != nil {
		mod(r)
	}
	return r
}

// wantDynamic is the Request of the base EIP-1559 object, changed by mod.
func wantDynamic(mod func(r *Request)) *Request {
	r := wantLegacy(nil)
	r.GasPrice = nil
	r.MaxFeePerGas = big.NewInt(2_000_000_000)
	r.MaxPriorityFeePerGas = big.NewInt(1_000_000_000)
	if mod != nil {
		mod(r)
	}
	return r
}

// diff describes how got differs from want, "" when they are equal.
func diff(got, want *Request) string {
	var d []string
	check := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	check("From", got.From, want.From)
	check("To", addrString(got.To), addrString(want.To))
	check("Gas", got.Gas, want.Gas)
	check("Value", bigString(got.Value), bigString(want.Value))
	check("Data", fmt.Sprintf("%x (nil %v)", got.Data, got.Data == nil), fmt.Sprintf("%x (nil %v)", want.Data, want.Data == nil))
	check("GasPrice", bigString(got.GasPrice), bigString(want.GasPrice))
	check("MaxFeePerGas", bigString(got.MaxFeePerGas), bigString(want.MaxFeePerGas))
	check("MaxPriorityFeePerGas", bigString(got.MaxPriorityFeePerGas), bigString(want.MaxPriorityFeePerGas))
	check("ChainID", bigString(got.ChainID), bigString(want.ChainID))
	check("AccessList", alString(got.AccessList), alString(want.AccessList))
	return strings.Join(d, "; ")
}

func addrString(a *common.Address) string {
	if a == nil {
		return "nil"
	}
	return a.Hex()
}

func bigString(v *big.Int) string {
	if v == nil {
		return "nil"
	}
	return v.String()
}

func alString(al types.AccessList) string {
	if al == nil {
		return "nil"
	}
	return fmt.Sprint(al)
}
