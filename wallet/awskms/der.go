package awskms

// The two DER structures KMS answers with: an ECDSA signature (kms:Sign) and a public key as
// an X.509 SubjectPublicKeyInfo (kms:GetPublicKey). Both are parsed strictly here: the
// standard library's x509.ParsePKIXPublicKey does not know secp256k1, and a lenient parser
// would let a mangled answer through to the signature checks.

import (
	"crypto/ecdsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/crypto"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

var (
	oidECPublicKey = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1} // id-ecPublicKey (RFC 5480)
	oidSecp256k1   = asn1.ObjectIdentifier{1, 3, 132, 0, 10}
	// Curves KMS also has, named in the error when a key is on one of them.
	curveNames = map[string]string{
		"1.2.840.10045.3.1.7": "P-256 (ECC_NIST_P256)",
		"1.3.132.0.34":        "P-384 (ECC_NIST_P384)",
		"1.3.132.0.35":        "P-521 (ECC_NIST_P521)",
	}
)

// errMalformedSignature and errMalformedKey are wrapped by every parse failure.
var (
	errMalformedSignature = errors.New("malformed DER ECDSA signature")
	errMalformedKey       = errors.New("malformed DER public key")
)

// maxIntBits bounds r and s: both are below the order of a 256-bit curve.
const maxIntBits = 256

// parseSignature reads the DER ECDSA-Sig-Value SEQUENCE { r INTEGER, s INTEGER } (RFC 3279)
// that kms:Sign returns. Anything but exactly that is refused: trailing bytes, long or
// indefinite lengths, non-minimal integers, zero or negative values, values over 256 bits.
func parseSignature(der []byte) (r, s *big.Int, err error) {
	input := cryptobyte.String(der)
	var seq cryptobyte.String
	if !input.ReadASN1(&seq, cbasn1.SEQUENCE) {
		return nil, nil, fmt.Errorf("%w: not a DER SEQUENCE", errMalformedSignature)
	}
	if !input.Empty() {
		return nil, nil, fmt.Errorf("%w: %d trailing bytes", errMalformedSignature, len(input))
	}
	r, s = new(big.Int), new(big.Int)
	if !seq.ReadASN1Integer(r) || !seq.ReadASN1Integer(s) {
		return nil, nil, fmt.Errorf("%w: r and s must be two DER INTEGERs", errMalformedSignature)
	}
	if !seq.Empty() {
		return nil, nil, fmt.Errorf("%w: %d bytes after s", errMalformedSignature, len(seq))
	}
	for _, v := range []struct {
		name string
		n    *big.Int
	}{{"r", r}, {"s", s}} {
		if v.n.Sign() <= 0 {
			return nil, nil, fmt.Errorf("%w: %s is not positive", errMalformedSignature, v.name)
		}
		if v.n.BitLen() > maxIntBits {
			return nil, nil, fmt.Errorf("%w: %s has %d bits, more than %d", errMalformedSignature, v.name, v.n.BitLen(), maxIntBits)
		}
	}
	return r, s, nil
}

// parsePublicKey reads the DER SubjectPublicKeyInfo that kms:GetPublicKey returns and
// returns its secp256k1 key: algorithm id-ecPublicKey with the named curve 1.3.132.0.10, and
// the 65-byte uncompressed point, which must be on the curve. A key on another curve is
// refused with an error naming it.
func parsePublicKey(der []byte) (*ecdsa.PublicKey, error) {
	input := cryptobyte.String(der)
	var spki, alg cryptobyte.String
	if !input.ReadASN1(&spki, cbasn1.SEQUENCE) {
		return nil, fmt.Errorf("%w: not a DER SEQUENCE", errMalformedKey)
	}
	if !input.Empty() {
		return nil, fmt.Errorf("%w: %d trailing bytes", errMalformedKey, len(input))
	}
	if !spki.ReadASN1(&alg, cbasn1.SEQUENCE) {
		return nil, fmt.Errorf("%w: no AlgorithmIdentifier", errMalformedKey)
	}
	var algOID, curveOID asn1.ObjectIdentifier
	if !alg.ReadASN1ObjectIdentifier(&algOID) {
		return nil, fmt.Errorf("%w: no algorithm OID", errMalformedKey)
	}
	if !algOID.Equal(oidECPublicKey) {
		return nil, fmt.Errorf("%w: algorithm %s is not id-ecPublicKey (%s)", errMalformedKey, algOID, oidECPublicKey)
	}
	if !alg.ReadASN1ObjectIdentifier(&curveOID) || !alg.Empty() {
		return nil, fmt.Errorf("%w: EC parameters must be one named-curve OID", errMalformedKey)
	}
	if !curveOID.Equal(oidSecp256k1) {
		name := curveNames[curveOID.String()]
		if name == "" {
			name = curveOID.String()
		}
		return nil, fmt.Errorf("%w: the key is on curve %s, not secp256k1 (%s)", errMalformedKey, name, oidSecp256k1)
	}
	var point asn1.BitString
	if !spki.ReadASN1BitString(&point) {
		return nil, fmt.Errorf("%w: no subjectPublicKey BIT STRING", errMalformedKey)
	}
	if !spki.Empty() {
		return nil, fmt.Errorf("%w: %d bytes after the subjectPublicKey", errMalformedKey, len(spki))
	}
	if point.BitLength != 8*65 {
		return nil, fmt.Errorf("%w: the point has %d bits, want an uncompressed point of 65 bytes", errMalformedKey, point.BitLength)
	}
	pub, err := crypto.UnmarshalPubkey(point.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformedKey, err)
	}
	return pub, nil
}
