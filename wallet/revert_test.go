package wallet

import (
	"encoding/hex"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// abiRevert is revert data of selector with args ABI-encoded as types.
func abiRevert(t *testing.T, selector string, typ string, arg any) []byte {
	t.Helper()
	ty, err := abi.NewType(typ, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := abi.Arguments{{Type: ty}}.Pack(arg)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := hex.DecodeString(selector)
	return append(sel, enc...)
}

func TestRevertReason(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"no data", nil, "execution reverted"},
		{"Error(string)", abiRevert(t, "08c379a0", "string", "web3gate test revert"), "execution reverted: web3gate test revert"},
		{"empty Error(string)", abiRevert(t, "08c379a0", "string", ""), "execution reverted: "},
		{"Panic(0x11)", abiRevert(t, "4e487b71", "uint256", big.NewInt(0x11)), "execution reverted: panic 0x11"},
		{"custom error", []byte{0xde, 0xad, 0xbe, 0xef, 0x01}, "execution reverted: custom error 0xdeadbeef01"},
		{"Error selector, truncated body", []byte{0x08, 0xc3, 0x79, 0xa0, 0x00}, "execution reverted: custom error 0x08c379a000"},
		{"Error selector, length past the end", append([]byte{0x08, 0xc3, 0x79, 0xa0}, append(common.LeftPadBytes([]byte{0x20}, 32), common.LeftPadBytes([]byte{0xff}, 32)...)...),
			"execution reverted: custom error 0x08c379a0" + strings.Repeat("0", 62) + "20" + strings.Repeat("0", 62) + "ff"},
		{"Error selector, huge offset", append([]byte{0x08, 0xc3, 0x79, 0xa0}, common.LeftPadBytes([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 32)...),
			"execution reverted: custom error 0x08c379a0" + strings.Repeat("0", 48) + strings.Repeat("f", 16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := revertReason(tc.data); got != tc.want {
				t.Fatalf("revertReason(%x) = %q, want %q", tc.data, got, tc.want)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		got := revertReason(abiRevert(t, "08c379a0", "string", long))
		if len(got) > maxRevertReason || !utf8.ValidString(got) || !strings.HasPrefix(got, "execution reverted: éé") {
			t.Fatalf("long reason: %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[:40])
		}
		if len(got) < maxRevertReason-1 {
			t.Fatalf("long reason cut to %d bytes, want %d or one less", len(got), maxRevertReason)
		}
	})
}

func TestRevertData(t *testing.T) {
	for _, tc := range []struct {
		name string
		data any
		want string
	}{
		{"raw JSON string", json.RawMessage(`"0x08c379a0"`), "08c379a0"},
		{"string", "0xdeadbeef", "deadbeef"},
		{"none", nil, ""},
		{"not hex", json.RawMessage(`"reverted"`), ""},
		{"object", json.RawMessage(`{"x":1}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(revertData(tc.data)); got != tc.want {
				t.Fatalf("revertData(%v) = %s, want %s", tc.data, got, tc.want)
			}
		})
	}
}

func TestMethodUnsupported(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&jsonrpc.Error{Code: -32601, Message: "the method eth_getBlockReceipts does not exist/is not available"}, true},
		{&jsonrpc.Error{Code: -32000, Message: "Method not found"}, true},
		{&jsonrpc.Error{Code: -32603, Message: "eth_getBlockReceipts is unsupported"}, true},
		{&jsonrpc.Error{Code: -32000, Message: "header not found"}, false},
		{jsonrpc.ErrUpstreamTimeout, false},
	} {
		if got := methodUnsupported(tc.err); got != tc.want {
			t.Errorf("methodUnsupported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
