package pkcs11

import (
	"fmt"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

var fmtSprintf = fmt.Sprintf

func TestECPoint(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	want := crypto.PubkeyToAddress(key.PublicKey)
	der := encodeECPoint(&key.PublicKey)
	if len(der) != 67 || der[0] != 0x04 || der[1] != 65 {
		t.Fatalf("DER point % x", der[:2])
	}
	for name, point := range map[string][]byte{"der": der, "raw": crypto.FromECDSAPub(&key.PublicKey)} {
		got, err := addressOfECPoint(secp256k1Params, point)
		if err != nil || got != want {
			t.Fatalf("%s: %s, %v", name, got, err)
		}
	}
	p256 := []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}
	if _, err := addressOfECPoint(p256, der); err == nil {
		t.Fatal("P-256 params accepted")
	}
	for _, bad := range [][]byte{nil, {0x04}, der[:66], append([]byte{0x04, 0x41, 0x02}, der[3:]...)} {
		if _, err := addressOfECPoint(secp256k1Params, bad); err == nil {
			t.Fatalf("accepted % x", bad)
		}
	}
}
