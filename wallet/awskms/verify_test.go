package awskms

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"math/big"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/crypto"
)

var (
	curveN = crypto.S256().Params().N
	halfN  = new(big.Int).Rsh(curveN, 1)
)

// verifyK1 checks a secp256k1 (r, s) against pub independently of wallet's conversion:
// go-ethereum's verifier takes low s only, and (r, s) is valid exactly when (r, n-s) is.
func verifyK1(pub *ecdsa.PublicKey, digest []byte, r, s *big.Int) bool {
	if s.Cmp(halfN) > 0 {
		s = new(big.Int).Sub(curveN, s)
	}
	rs := make([]byte, 64)
	r.FillBytes(rs[:32])
	s.FillBytes(rs[32:])
	return crypto.VerifySignature(crypto.FromECDSAPub(pub), digest, rs)
}

// verifyP256Signatures has KMS sign with the P-256 key keyID (public key spki) and checks
// each DER signature, as parseSignature reads it, with the standard library.
func verifyP256Signatures(t *testing.T, b *Backend, keyID string, spki []byte) {
	t.Helper()
	k, err := x509.ParsePKIXPublicKey(spki)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.(*ecdsa.PublicKey)
	for i := 0; i < 20; i++ {
		digest := sha256.Sum256([]byte{byte(i)})
		out, err := b.client.Sign(context.Background(), &kms.SignInput{KeyId: aws.String(keyID), Message: digest[:],
			MessageType: types.MessageTypeDigest, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256})
		if err != nil {
			t.Fatal(err)
		}
		r, s, err := parseSignature(out.Signature)
		if err != nil {
			t.Fatalf("KMS P-256 signature %x: %v", out.Signature, err)
		}
		if !ecdsa.Verify(pub, digest[:], r, s) {
			t.Fatalf("KMS P-256 signature %d does not verify", i)
		}
	}
}
