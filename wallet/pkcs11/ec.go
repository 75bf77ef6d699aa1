package pkcs11

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/asn1"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// secp256k1Params is CKA_EC_PARAMS for secp256k1: the DER encoding of its OID 1.3.132.0.10
// (SEC 2), the namedCurve choice of ECParameters.
var secp256k1Params = []byte{0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a}

// uncompressedLen is the length of an uncompressed secp256k1 point: 0x04 || X || Y.
const uncompressedLen = 65

// encodeECPoint returns CKA_EC_POINT for pub as PKCS#11 v2.20+ wants it: the DER OCTET
// STRING holding the uncompressed point.
func encodeECPoint(pub *ecdsa.PublicKey) []byte {
	b, err := asn1.Marshal(crypto.FromECDSAPub(pub))
	if err != nil {
		panic(err) // an OCTET STRING of 65 bytes always marshals
	}
	return b
}

// parseECPoint returns the uncompressed point in a CKA_EC_POINT: the DER OCTET STRING that
// the standard prescribes, or the raw point some modules return.
func parseECPoint(v []byte) ([]byte, error) {
	if len(v) == uncompressedLen && v[0] == 0x04 {
		return v, nil
	}
	var raw []byte
	rest, err := asn1.Unmarshal(v, &raw)
	if err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("CKA_EC_POINT: neither a DER OCTET STRING nor a raw point (%d bytes)", len(v))
	}
	if len(raw) != uncompressedLen || raw[0] != 0x04 {
		return nil, fmt.Errorf("CKA_EC_POINT: not an uncompressed point of a 256-bit curve (%d bytes)", len(raw))
	}
	return raw, nil
}

// addressOfECPoint returns the address of the secp256k1 public key in a CKA_EC_POINT, after
// checking that CKA_EC_PARAMS names secp256k1 and that the point is on the curve.
func addressOfECPoint(params, point []byte) (common.Address, error) {
	if !bytes.Equal(params, secp256k1Params) {
		return common.Address{}, fmt.Errorf("the key is not on secp256k1 (CKA_EC_PARAMS %x)", params)
	}
	raw, err := parseECPoint(point)
	if err != nil {
		return common.Address{}, err
	}
	pub, err := crypto.UnmarshalPubkey(raw)
	if err != nil {
		return common.Address{}, fmt.Errorf("CKA_EC_POINT: %w", err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}
