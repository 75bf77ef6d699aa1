package awskms

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

type ecdsaSig struct{ R, S *big.Int }

func derSig(t testing.TB, r, s *big.Int) []byte {
	b, err := asn1.Marshal(ecdsaSig{r, s})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type spki struct {
	Algorithm pkix.AlgorithmIdentifier
	PublicKey asn1.BitString
}

// k1SPKI is the SubjectPublicKeyInfo of a secp256k1 key, as KMS gives it.
func k1SPKI(t testing.TB, pub *ecdsa.PublicKey) []byte {
	curve, _ := asn1.Marshal(oidSecp256k1)
	point := crypto.FromECDSAPub(pub)
	b, err := asn1.Marshal(spki{
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidECPublicKey, Parameters: asn1.RawValue{FullBytes: curve}},
		PublicKey: asn1.BitString{Bytes: point, BitLength: 8 * len(point)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSignature(t *testing.T) {
	r, _ := new(big.Int).SetString("80"+strings.Repeat("11", 31), 16) // high bit: DER adds a 00
	s := big.NewInt(1)
	good := derSig(t, r, s)
	gr, gs, err := parseSignature(good)
	if err != nil || gr.Cmp(r) != 0 || gs.Cmp(s) != 0 {
		t.Fatalf("parse %x: %v %v %v", good, gr, gs, err)
	}
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	if _, _, err := parseSignature(derSig(t, max, max)); err != nil {
		t.Fatalf("256-bit values: %v", err)
	}
	bad := map[string][]byte{
		"empty":             {},
		"trailing byte":     append(append([]byte{}, good...), 0),
		"negative r":        derSig(t, big.NewInt(-5), s),
		"zero s":            derSig(t, r, big.NewInt(0)),
		"257-bit r":         derSig(t, new(big.Int).Lsh(big.NewInt(1), 256), s),
		"third integer":     mustHex("3009020101020101020101"),
		"one integer":       mustHex("3003020101"),
		"a SET":             mustHex("3106020101020101"),
		"non-minimal int":   mustHex("300702020001020101"),
		"long-form length":  mustHex("30810602010102010 1"),
		"indefinite length": mustHex("3080020101020101 0000"),
		"length past end":   mustHex("3007020101020101"),
		"octet string r":    mustHex("3006040101020101"),
		"bytes after s":     mustHex("30080201010201010500"),
	}
	for name, der := range bad {
		if _, _, err := parseSignature(der); err == nil {
			t.Errorf("%s (%x): accepted", name, der)
		} else if !strings.Contains(err.Error(), "malformed DER ECDSA signature") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParsePublicKey(t *testing.T) {
	k, _ := crypto.GenerateKey()
	der := k1SPKI(t, &k.PublicKey)
	pub, err := parsePublicKey(der)
	if err != nil || crypto.PubkeyToAddress(*pub) != crypto.PubkeyToAddress(k.PublicKey) {
		t.Fatalf("parse: %v", err)
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p256DER, _ := x509.MarshalPKIXPublicKey(&p256.PublicKey)
	if _, err := parsePublicKey(p256DER); err == nil || !strings.Contains(err.Error(), "P-256 (ECC_NIST_P256)") {
		t.Errorf("a P-256 key: %v", err)
	}
	rsaDER := mustHex("300d06092a864886f70d0101010500") // rsaEncryption, NULL params: no key
	if _, err := parsePublicKey(append(rsaDER[:0:0], rsaDER...)); err == nil {
		t.Error("an RSA AlgorithmIdentifier: accepted")
	}
	off := bytes.Clone(der)
	off[len(off)-1] ^= 1 // the point leaves the curve
	if _, err := parsePublicKey(off); err == nil {
		t.Error("a point off the curve: accepted")
	}
	compressed := crypto.CompressPubkey(&k.PublicKey)
	curve, _ := asn1.Marshal(oidSecp256k1)
	cDER, _ := asn1.Marshal(spki{
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidECPublicKey, Parameters: asn1.RawValue{FullBytes: curve}},
		PublicKey: asn1.BitString{Bytes: compressed, BitLength: 8 * len(compressed)},
	})
	if _, err := parsePublicKey(cDER); err == nil {
		t.Error("a compressed point: accepted")
	}
	if _, err := parsePublicKey(append(bytes.Clone(der), 0)); err == nil {
		t.Error("trailing byte: accepted")
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// Malformed signatures never panic the parser, and what it accepts is exactly the DER
// encoding of what it returns.
func FuzzParseSignature(f *testing.F) {
	for _, seed := range []string{"3006020101020101", "300702020080020101", "3008020101020101 00", "3080020101020101 0000"} {
		f.Add(mustHex(seed))
	}
	n := crypto.S256().Params().N
	f.Add(derSig(f, n, new(big.Int).Sub(n, big.NewInt(1))))
	f.Fuzz(func(t *testing.T, der []byte) {
		r, s, err := parseSignature(der)
		if err != nil {
			return
		}
		if r.Sign() <= 0 || s.Sign() <= 0 || r.BitLen() > 256 || s.BitLen() > 256 {
			t.Fatalf("accepted r=%v s=%v", r, s)
		}
		if again := derSig(t, r, s); !bytes.Equal(again, der) {
			t.Fatalf("accepted %x, which re-encodes as %x", der, again)
		}
	})
}

// Malformed public keys never panic the parser; what it accepts re-encodes to the input.
func FuzzParsePublicKey(f *testing.F) {
	k, _ := crypto.GenerateKey()
	f.Add(k1SPKI(f, &k.PublicKey))
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p256DER, _ := x509.MarshalPKIXPublicKey(&p256.PublicKey)
	f.Add(p256DER)
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		pub, err := parsePublicKey(der)
		if err != nil {
			return
		}
		if again := k1SPKI(t, pub); !bytes.Equal(again, der) {
			t.Fatalf("accepted %x, which re-encodes as %x", der, again)
		}
	})
}
