package awskms

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/wallet"
)

// Signer signs with one KMS key: a wallet.Signer, from Backend.Open.
type Signer struct {
	b     *Backend
	keyID string // the key's ARN, as GetPublicKey resolved the ref
	addr  common.Address
}

var _ wallet.Signer = (*Signer)(nil)

// Address is the account's address.
func (s *Signer) Address() common.Address { return s.addr }

// Backend is wallet.BackendAWSKMS.
func (s *Signer) Backend() string { return wallet.BackendAWSKMS }

// KeyID is the key's ARN.
func (s *Signer) KeyID() string { return s.keyID }

// SignDigest signs the 32-byte digest with kms:Sign (ECDSA_SHA_256, MessageType DIGEST: KMS
// signs the digest as given, it does not hash it again) and returns [R || S || V], low-s,
// recovering to the account. The whole of it (the wait for a signing slot, the SDK's
// attempts) is bounded by signTimeout and ctx: past either, or when KMS throttles, fails with
// 5xx or cannot be reached, the error wraps wallet.ErrSignerUnavailable. A key that KMS
// refuses (gone, disabled, pending deletion, access denied) gives an error wrapping
// ErrKeyRefused, which retrying will not cure.
func (s *Signer) SignDigest(ctx context.Context, digest []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("awskms: digest must be 32 bytes, got %d", len(digest))
	}
	if s.b.isClosed() {
		return nil, errClosed
	}
	timeout := s.b.cfg.SignTimeout
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("awskms: sign with key %s: %w: %s", s.keyID, wallet.ErrSignerUnavailable, ctxReason(ctx, timeout))
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case s.b.sem <- struct{}{}:
	case <-sctx.Done():
		return nil, fmt.Errorf("awskms: sign with key %s: %w: all %d signing slots stayed busy (%v)",
			s.keyID, wallet.ErrSignerUnavailable, cap(s.b.sem), ctxReason(ctx, timeout))
	}
	out, err := s.b.client.Sign(sctx, &kms.SignInput{
		KeyId:            aws.String(s.keyID),
		Message:          digest,
		MessageType:      types.MessageTypeDigest,
		SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256,
	})
	<-s.b.sem
	if err != nil {
		return nil, classify(ctx, "sign with", s.keyID, timeout, err)
	}
	r, sv, err := parseSignature(out.Signature)
	if err != nil {
		return nil, fmt.Errorf("awskms: sign with key %s: %w: %v", s.keyID, wallet.ErrBadSignature, err)
	}
	sig, err := wallet.SignatureFromRS(digest, r, sv, s.addr)
	if err != nil {
		return nil, fmt.Errorf("awskms: sign with key %s: %w", s.keyID, err)
	}
	return sig, nil
}
