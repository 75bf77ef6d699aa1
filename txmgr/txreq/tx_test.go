package txreq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// testKey is a throwaway key for these tests only.
const testKey = "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"

func TestTxSignRoundTrip(t *testing.T) {
	key, err := crypto.HexToECDSA(testKey)
	if err != nil {
		t.Fatal(err)
	}
	sender := crypto.PubkeyToAddress(key.PublicKey)
	from := `"` + sender.Hex() + `"`
	al := `[{"address":"` + toHex + `","storageKeys":["0x000000000000000000000000000000000000000000000000000000000000002a"]}]`
	chainID := big.NewInt(polygon)

	tests := []struct {
		name     string
		params   string
		wantType uint8
		wantV    []int64 // the signature V values the transaction may carry
	}{
		// EIP-155: V = chainID*2 + 35 + recovery id.
		{"legacy is EIP-155 protected", legacy("from", from, "data", `"0xa9059cbb"`), types.LegacyTxType, []int64{2*polygon + 35, 2*polygon + 36}},
		{"eip-1559 with access list", dynamic("from", from, "data", `"0x00ff"`, "accessList", al, "chainId", `"0x89"`), types.DynamicFeeTxType, []int64{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.params), polygon)
			if err != nil {
				t.Fatal(err)
			}
			if r.Type() != tt.wantType {
				t.Fatalf("Type() = %d, want %d", r.Type(), tt.wantType)
			}
			const nonce = 7
			signed, err := types.SignTx(r.Tx(nonce, chainID), types.LatestSignerForChainID(chainID), key)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := signed.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var tx types.Transaction
			if err := tx.UnmarshalBinary(raw); err != nil {
				t.Fatal(err)
			}
			got, err := types.Sender(types.LatestSignerForChainID(chainID), &tx)
			if err != nil || got != sender {
				t.Fatalf("recovered sender %s, %v; want %s", got.Hex(), err, sender.Hex())
			}
			if tx.Hash() != signed.Hash() {
				t.Errorf("hash after decoding %s, want %s", tx.Hash(), signed.Hash())
			}
			if !tx.Protected() || tx.ChainId().Cmp(chainID) != 0 {
				t.Errorf("Protected() = %v, ChainId() = %v; want true, %v", tx.Protected(), tx.ChainId(), chainID)
			}
			v, _, _ := tx.RawSignatureValues()
			if !v.IsInt64() || v.Int64() != tt.wantV[0] && v.Int64() != tt.wantV[1] {
				t.Errorf("V = %v, want one of %v", v, tt.wantV)
			}
			if tx.Type() != tt.wantType || tx.Nonce() != nonce || tx.Gas() != r.Gas || *tx.To() != *r.To ||
				tx.Value().Cmp(r.Value) != 0 || !bytes.Equal(tx.Data(), r.Data) {
				t.Errorf("tx type %d nonce %d gas %d to %s value %v data %x; want %d %d %d %s %v %x",
					tx.Type(), tx.Nonce(), tx.Gas(), tx.To().Hex(), tx.Value(), tx.Data(),
					tt.wantType, nonce, r.Gas, r.To.Hex(), r.Value, r.Data)
			}
			wantTip, wantCap := r.GasPrice, r.GasPrice
			if r.GasPrice == nil {
				wantTip, wantCap = r.MaxPriorityFeePerGas, r.MaxFeePerGas
			}
			if tx.GasTipCap().Cmp(wantTip) != 0 || tx.GasFeeCap().Cmp(wantCap) != 0 {
				t.Errorf("tip cap %v, fee cap %v; want %v, %v", tx.GasTipCap(), tx.GasFeeCap(), wantTip, wantCap)
			}
			if fmt.Sprint(tx.AccessList()) != fmt.Sprint(r.AccessList) { // nil and empty alike

				t.Errorf("access list %v, want %v", tx.AccessList(), r.AccessList)
			}
			if tx.Cost().Cmp(r.MaxCost()) != 0 {
				t.Errorf("tx.Cost() = %v, MaxCost() = %v", tx.Cost(), r.MaxCost())
			}
		})
	}
}

func TestTxSharesNoMemory(t *testing.T) {
	r, err := Parse([]byte(dynamic("data", `"0x01"`, "accessList", `[{"address":"`+toHex+`","storageKeys":["0x000000000000000000000000000000000000000000000000000000000000002a"]}]`)), polygon)
	if err != nil {
		t.Fatal(err)
	}
	tx := r.Tx(0, big.NewInt(polygon))
	before := tx.Hash()
	r.Data[0] = 0xff
	r.To[0] = 0xff
	r.Value.SetInt64(5)
	r.MaxFeePerGas.SetInt64(5)
	r.MaxPriorityFeePerGas.SetInt64(5)
	r.AccessList[0].StorageKeys[0] = common.Hash{1}
	if tx.Hash() != before {
		t.Error("changing the request changed the transaction")
	}
}

func TestMaxCost(t *testing.T) {
	tests := []struct {
		name   string
		params string
		want   string
	}{
		{"legacy: gas × gasPrice + value", legacy(), "1000021000000000000"},        // 21000 × 1 gwei + 1 ether
		{"eip-1559: gas × maxFeePerGas + value", dynamic(), "1000042000000000000"}, // 21000 × 2 gwei + 1 ether
		{"zero price", legacy("gasPrice", `"0x0"`, "value", `"0x0"`), "0"},
		{"largest", legacy("gas", `"0xffffffffffffffff"`, "gasPrice", `"0x`+ff(64)+`"`, "value", `"0x`+ff(64)+`"`), // (2^64-1)(2^256-1) + 2^256-1 = 2^64 (2^256-1)
			new(big.Int).Lsh(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)), 64).String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.params), polygon)
			if err != nil {
				t.Fatal(err)
			}
			got := r.MaxCost()
			if got.String() != tt.want {
				t.Errorf("MaxCost() = %v, want %s", got, tt.want)
			}
			got.SetInt64(-1)
			if r.MaxCost().String() != tt.want {
				t.Error("changing the result of MaxCost changed the request")
			}
		})
	}
}

func ff(n int) string { return string(bytes.Repeat([]byte("f"), n)) }

func TestMarshalJSONRoundTrip(t *testing.T) {
	al := `[{"address":"` + toHex + `","storageKeys":["0x000000000000000000000000000000000000000000000000000000000000002a"]},{"address":"` + fromHex + `","storageKeys":[]}]`
	tests := []struct {
		name   string
		params string
		want   string
	}{
		{"legacy", legacy("value", `"0x0001"`, "data", `"0xABCD"`, "from", `"0X`+fromHex[2:]+`"`),
			`{"from":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed","to":"0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359","gas":"0x5208","gasPrice":"0x3b9aca00","value":"0x1","data":"0xabcd"}`},
		{"eip-1559 with everything", dynamic("input", `"0x"`, "data", "-", "chainId", `"0x0089"`, "type", `"0x2"`, "accessList", al),
			`{"from":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed","to":"0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359","gas":"0x5208","maxFeePerGas":"0x77359400","maxPriorityFeePerGas":"0x3b9aca00","value":"0xde0b6b3a7640000","data":"0x","chainId":"0x89","accessList":[{"address":"0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359","storageKeys":["0x000000000000000000000000000000000000000000000000000000000000002a"]},{"address":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed","storageKeys":[]}]}`},
		{"empty access list kept", dynamic("accessList", `[]`),
			`{"from":"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed","to":"0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359","gas":"0x5208","maxFeePerGas":"0x77359400","maxPriorityFeePerGas":"0x3b9aca00","value":"0xde0b6b3a7640000","data":"0x","accessList":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.params), polygon)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("MarshalJSON\n got  %s\n want %s", b, tt.want)
			}
			back, err := Parse([]byte("["+string(b)+"]"), polygon)
			if err != nil {
				t.Fatalf("Parse(MarshalJSON()) = %v", err)
			}
			if d := diff(back, r); d != "" {
				t.Errorf("Parse(MarshalJSON()): %s", d)
			}
		})
	}
}
