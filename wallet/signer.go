package wallet

// The signer interface: what the nonce manager and the sign stage sign with, whatever holds
// the key (the keystore, an HSM through PKCS#11, a cloud KMS).

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/store"
)

// Backend names, as an account records where its key lives (store.Account.Source) and as
// metrics label them.
const (
	BackendKeystore = store.SourceKeystore // the encrypted keystore (a folder, or the store)
	BackendDev      = store.SourceDev      // the embedded dev chain's well-known keys, in memory
	BackendPKCS11   = store.SourcePKCS11   // a PKCS#11 token (an HSM; SoftHSM2 in tests)
	BackendAWSKMS   = store.SourceAWSKMS   // AWS KMS (ECC_SECG_P256K1 keys)
)

var (
	// ErrSignerUnavailable wraps the failures of a backend that could not sign now (down,
	// slow, its token gone): the request fails, and the same request may succeed later.
	ErrSignerUnavailable = errors.New("signer unavailable")
	// ErrImportUnsupported is returned by a KeyBackend that cannot take a key from outside.
	ErrImportUnsupported = errors.New("this backend cannot import keys")
	// ErrBadSignature is returned when a backend's signature does not recover to the account:
	// nothing signed with it is used.
	ErrBadSignature = errors.New("the backend's signature does not recover to the account")
	// ErrInvalidTypedData is returned by SignTypedData for a document EIP-712 cannot hash.
	ErrInvalidTypedData = errors.New("invalid typed data")
)

// Signer signs with one account's key.
type Signer interface {
	// Address is the account's address.
	Address() common.Address
	// Backend is where the key lives: one of the Backend names.
	Backend() string
	// SignDigest signs a 32-byte digest and returns the Ethereum signature [R || S || V]:
	// S in the lower half of the curve order (EIP-2), V in {0, 1}, recovering to Address.
	// A backend that cannot answer (down, slow, ctx ended) returns an error wrapping
	// ErrSignerUnavailable.
	SignDigest(ctx context.Context, digest []byte) ([]byte, error)
}

// KeyRef names a key inside a KeyBackend: what an account records (store.Account.KeyRef)
// to find its key again, and the key's address.
type KeyRef struct {
	Ref     string // backend-specific: a PKCS#11 CKA_ID in hex, a KMS key id or ARN
	Address common.Address
}

// KeyBackend holds keys outside the keystore, inside hardware or a KMS: they are generated
// (or imported) there and never leave it; web3gate keeps only their references.
type KeyBackend interface {
	// Name is the backend's name (BackendPKCS11, BackendAWSKMS).
	Name() string
	// Generate makes a new secp256k1 key inside the backend, not extractable; label names
	// it for the backend's operators (may be empty).
	Generate(ctx context.Context, label string) (KeyRef, error)
	// Import puts priv into the backend, not extractable from then on, or answers
	// ErrImportUnsupported.
	Import(ctx context.Context, priv *ecdsa.PrivateKey, label string) (KeyRef, error)
	// Open returns the signer of the key ref, after checking that its public key is addr's.
	Open(ctx context.Context, ref string, addr common.Address) (Signer, error)
	// Close releases the backend's sessions and connections.
	Close() error
}

var (
	secp256k1N     = crypto.S256().Params().N
	secp256k1HalfN = new(big.Int).Rsh(secp256k1N, 1)
)

// SignatureFromRS turns an ECDSA signature (r, s) of digest by addr's key, as an HSM or a
// KMS returns it, into Ethereum's [R || S || V]: s moved to the lower half of the order
// (EIP-2; s and n-s are both valid), V found by recovering the public key with each
// recovery id and keeping the one that gives addr. A signature that recovers to no address
// or to another is ErrBadSignature.
func SignatureFromRS(digest []byte, r, s *big.Int, addr common.Address) ([]byte, error) {
	if len(digest) != common.HashLength {
		return nil, fmt.Errorf("digest must be %d bytes, got %d", common.HashLength, len(digest))
	}
	if r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(secp256k1N) >= 0 || s.Cmp(secp256k1N) >= 0 {
		return nil, fmt.Errorf("%w: r or s out of range", ErrBadSignature)
	}
	if s.Cmp(secp256k1HalfN) > 0 {
		s = new(big.Int).Sub(secp256k1N, s)
	}
	sig := make([]byte, crypto.SignatureLength)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:64])
	for v := byte(0); v < 2; v++ {
		sig[crypto.RecoveryIDOffset] = v
		pub, err := crypto.SigToPub(digest, sig)
		if err == nil && crypto.PubkeyToAddress(*pub) == addr {
			return sig, nil
		}
	}
	return nil, fmt.Errorf("%w %s", ErrBadSignature, addr.Hex())
}

// SignatureFromRaw is SignatureFromRS for the 64-byte r || s a PKCS#11 token returns for
// CKM_ECDSA on a 256-bit curve.
func SignatureFromRaw(digest, rs []byte, addr common.Address) ([]byte, error) {
	if len(rs) != 64 {
		return nil, fmt.Errorf("%w: %d bytes, want r || s in 64", ErrBadSignature, len(rs))
	}
	return SignatureFromRS(digest, new(big.Int).SetBytes(rs[:32]), new(big.Int).SetBytes(rs[32:]), addr)
}

// VerifySignature checks that sig ([R || S || V], V in {0, 1}) is a signature of digest that
// recovers to addr, with S low: what every signature is checked for before it is used.
func VerifySignature(digest, sig []byte, addr common.Address) error {
	if len(sig) != crypto.SignatureLength || sig[crypto.RecoveryIDOffset] > 1 {
		return fmt.Errorf("%w: malformed", ErrBadSignature)
	}
	if new(big.Int).SetBytes(sig[32:64]).Cmp(secp256k1HalfN) > 0 {
		return fmt.Errorf("%w: s is high", ErrBadSignature)
	}
	pub, err := crypto.SigToPub(digest, sig)
	if err != nil || crypto.PubkeyToAddress(*pub) != addr {
		return fmt.Errorf("%w %s", ErrBadSignature, addr.Hex())
	}
	return nil
}
