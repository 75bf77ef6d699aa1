package txreq

import (
	"errors"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

var accessList1x2 = `[{"address":"` + toHex + `","storageKeys":["0x` + strings.Repeat("00", 32) + `","0x` + strings.Repeat("11", 32) + `"]}]`

func TestCheckGasOK(t *testing.T) {
	tests := []struct {
		name        string
		params      string
		block, capG uint64
	}{
		{"transfer at exactly 21000", legacy(), 30_000_000, 0},
		{"4 non-zero bytes at the floor data gas", legacy("gas", "\"0x52a8\"", "data", `"0xa9059cbb"`), 30_000_000, 0},       // 21160
		{"access list at exactly its intrinsic gas", dynamic("gas", `"0x6a40"`, "accessList", accessList1x2), 30_000_000, 0}, // 27200
		{"at the block gas limit", legacy("gas", `"0x1c9c380"`), 30_000_000, 0},
		{"at the cap", legacy("gas", `"0x186a0"`), 30_000_000, 100_000},
		{"cap 0 is no cap", legacy("gas", `"0x1c9c380"`), 30_000_000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.params), polygon)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckGas(r, tt.block, tt.capG); err != nil {
				t.Errorf("CheckGas(gas %d, %d, %d) = %v", r.Gas, tt.block, tt.capG, err)
			}
		})
	}
}

func TestCheckGasRejects(t *testing.T) {
	tests := []struct {
		name        string
		params      string
		block, capG uint64
		msg         string
	}{
		{"transfer below 21000", legacy("gas", `"0x5207"`), 30_000_000, 0, "intrinsic gas too low: have 20999, want 21000"},
		{"gas zero", legacy("gas", `"0x0"`), 30_000_000, 0, "intrinsic gas too low: have 0, want 21000"},
		// 21000 + 4×16 (EIP-2028 non-zero bytes) + 2×4 (zero bytes)
		{"data bytes", legacy("gas", `"0x5247"`, "data", `"0xa9059cbb0000"`), 30_000_000, 0, "intrinsic gas too low: have 21063, want 21072"},
		// 21000 + 2400 per address + 1900 per storage key
		{"access list", dynamic("gas", `"0x6a3f"`, "accessList", accessList1x2), 30_000_000, 0, "intrinsic gas too low: have 27199, want 27200"},
		// EIP-7623: 21000 + 10 × (4 tokens per non-zero byte); intrinsic is only 21064
		{"floor data gas", legacy("gas", `"0x52a7"`, "data", `"0xa9059cbb"`), 30_000_000, 0, "insufficient gas for floor data gas cost: have 21159, want 21160"},
		{"above the block gas limit", legacy("gas", `"0x1c9c381"`), 30_000_000, 0, "gas 30000001 exceeds block gas limit 30000000"},
		{"block gas limit before cap", legacy("gas", `"0x1c9c381"`), 30_000_000, 25_000, "gas 30000001 exceeds block gas limit 30000000"},
		{"above the cap", legacy("gas", `"0x186a1"`), 30_000_000, 100_000, "gas 100001 exceeds the configured cap 100000"},
		{"intrinsic before cap", legacy("gas", `"0x5207"`), 30_000_000, 1, "intrinsic gas too low: have 20999, want 21000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.params), polygon)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckGas(r, tt.block, tt.capG)
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("CheckGas = %v (%T), want a *jsonrpc.Error", err, err)
			}
			if !errors.Is(err, ErrGas) || je.Code != -32000 || je.Status() != 200 {
				t.Errorf("CheckGas = code %d, HTTP %d, want -32000, 200 (ErrGas)", je.Code, je.Status())
			}
			if errors.Is(err, jsonrpc.ErrInvalidParams) {
				t.Error("CheckGas error is also ErrInvalidParams")
			}
			if je.Message != tt.msg {
				t.Errorf("message %q\n want    %q", je.Message, tt.msg)
			}
		})
	}
}
