package integration

import (
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/web3gate/web3gate/config"
)

// TestSignaturesRecoverToTheSigner checks personal_sign, eth_sign and eth_signTypedData_v4
// answers by recovering the signer from them.
func TestSignaturesRecoverToTheSigner(t *testing.T) {
	ts := startServer(t, devConfig(t))
	dev := common.HexToAddress("0x169E8AF7B0bE789C52Ee116Dc358C5df45b22903")
	call := func(method string, params ...any) []byte {
		t.Helper()
		p, _ := json.Marshal(params)
		_, _, body := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+string(p)+`}`,
			"X-API-Key", config.DevClientID, "Authorization", "Bearer "+config.DevToken)
		var resp struct {
			Result hexutil.Bytes
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal(body, &resp); err != nil || resp.Error != nil || len(resp.Result) != 65 {
			t.Fatalf("%s: %s", method, body)
		}
		return resp.Result
	}
	recoverAddr := func(hash, sig []byte) common.Address {
		t.Helper()
		s := append([]byte(nil), sig...)
		if s[64] != 27 && s[64] != 28 {
			t.Fatalf("V = %d, want 27 or 28", s[64])
		}
		s[64] -= 27
		pub, err := crypto.SigToPub(hash, s)
		if err != nil {
			t.Fatal(err)
		}
		return crypto.PubkeyToAddress(*pub)
	}
	msg := []byte("hello web3gate")
	for name, sig := range map[string][]byte{
		"personal_sign":         call("personal_sign", hexutil.Encode(msg), dev.Hex()),
		"personal_sign swapped": call("personal_sign", dev.Hex(), hexutil.Encode(msg)),
		"personal_sign text":    call("personal_sign", string(msg), dev.Hex()),
		"eth_sign":              call("eth_sign", dev.Hex(), hexutil.Encode(msg)),
	} {
		if got := recoverAddr(accounts.TextHash(msg), sig); got != dev {
			t.Errorf("%s recovers to %s", name, got.Hex())
		}
	}
	td := greeting()
	hash, _, err := apitypes.TypedDataAndHash(td)
	if err != nil {
		t.Fatal(err)
	}
	if got := recoverAddr(hash, call("eth_signTypedData_v4", dev.Hex(), td)); got != dev {
		t.Errorf("eth_signTypedData_v4 recovers to %s", got.Hex())
	}
}

// greeting is an EIP-712 document for eth_signTypedData_v4 on the dev chain (chain id 1337).
func greeting() apitypes.TypedData {
	return apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {{Name: "name", Type: "string"}, {Name: "chainId", Type: "uint256"}},
			"Greeting":     {{Name: "text", Type: "string"}},
		},
		PrimaryType: "Greeting",
		Domain:      apitypes.TypedDataDomain{Name: "web3gate", ChainId: (*math.HexOrDecimal256)(big.NewInt(1337))},
		Message:     apitypes.TypedDataMessage{"text": "hello"},
	}
}
