package awskms

// Generating keys inside KMS and reading their public keys.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// labelTag is the tag holding a generated key's label (tags are what KMS's console and
// kms:ListResourceTags show; the description holds it too).
const labelTag = "web3gate:label"

// maxLabel is KMS's bound on a tag value.
const maxLabel = 256

// Generate makes a new ECC_SECG_P256K1 SIGN_VERIFY key in KMS (description and tag
// web3gate:label = label, plus the configured tags; an alias when keyAliasPrefix is set) and
// returns its ARN and address. Each KMS call is bounded by signTimeout.
func (b *Backend) Generate(ctx context.Context, label string) (wallet.KeyRef, error) {
	if b.isClosed() {
		return wallet.KeyRef{}, errClosed
	}
	if len(label) > maxLabel {
		return wallet.KeyRef{}, fmt.Errorf("awskms: generate: label longer than %d bytes", maxLabel)
	}
	in := &kms.CreateKeyInput{
		KeySpec:     types.KeySpecEccSecgP256k1,
		KeyUsage:    types.KeyUsageTypeSignVerify,
		Description: aws.String(description(label)),
		Tags:        b.tags(label),
	}
	cctx, cancel := context.WithTimeout(ctx, b.cfg.SignTimeout)
	out, err := b.client.CreateKey(cctx, in)
	cancel()
	if err != nil {
		return wallet.KeyRef{}, classify(ctx, "create a key", "", b.cfg.SignTimeout, err)
	}
	if out.KeyMetadata == nil || (out.KeyMetadata.Arn == nil && out.KeyMetadata.KeyId == nil) {
		return wallet.KeyRef{}, fmt.Errorf("awskms: CreateKey answered no key id")
	}
	ref := aws.ToString(out.KeyMetadata.Arn)
	if ref == "" {
		ref = aws.ToString(out.KeyMetadata.KeyId)
	}
	keyARN, addr, err := b.publicKey(ctx, ref)
	if err != nil {
		return wallet.KeyRef{}, fmt.Errorf("awskms: key %s was created but: %w", ref, err)
	}
	if b.cfg.KeyAliasPrefix != "" {
		alias := "alias/" + b.cfg.KeyAliasPrefix + strings.ToLower(addr.Hex())
		cctx, cancel := context.WithTimeout(ctx, b.cfg.SignTimeout)
		_, err := b.client.CreateAlias(cctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(keyARN)})
		cancel()
		if err != nil {
			return wallet.KeyRef{}, fmt.Errorf("awskms: key %s (%s) was created but its alias %s was not: %w",
				keyARN, addr.Hex(), alias, classify(ctx, "create the alias of", keyARN, b.cfg.SignTimeout, err))
		}
	}
	b.log.Info("AWS KMS key generated", zap.String("key", keyARN), zap.String("address", addr.Hex()), zap.String("label", label))
	return wallet.KeyRef{Ref: keyARN, Address: addr}, nil
}

func description(label string) string {
	if label == "" {
		return "web3gate account key"
	}
	return "web3gate account key: " + label
}

// tags are the configured tags and the label's, in a stable order.
func (b *Backend) tags(label string) []types.Tag {
	keys := make([]string, 0, len(b.cfg.Tags))
	for k := range b.cfg.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, 0, len(keys)+1)
	for _, k := range keys {
		tags = append(tags, types.Tag{TagKey: aws.String(k), TagValue: aws.String(b.cfg.Tags[k])})
	}
	if label != "" {
		tags = append(tags, types.Tag{TagKey: aws.String(labelTag), TagValue: aws.String(label)})
	}
	return tags
}

// publicKey reads ref's public key with kms:GetPublicKey, checks that the key can sign as an
// Ethereum account (ECC_SECG_P256K1, SIGN_VERIFY, ECDSA_SHA_256), and returns the key's ARN
// (what KMS resolved ref to: aliases are followed once, here) and its address.
func (b *Backend) publicKey(ctx context.Context, ref string) (string, common.Address, error) {
	cctx, cancel := context.WithTimeout(ctx, b.cfg.SignTimeout)
	out, err := b.client.GetPublicKey(cctx, &kms.GetPublicKeyInput{KeyId: aws.String(ref)})
	cancel()
	if err != nil {
		return "", common.Address{}, classify(ctx, "read the public key of", ref, b.cfg.SignTimeout, err)
	}
	if out.KeySpec != types.KeySpecEccSecgP256k1 {
		return "", common.Address{}, fmt.Errorf("awskms: key %s is a %s key, not %s: it cannot hold an Ethereum account",
			ref, out.KeySpec, types.KeySpecEccSecgP256k1)
	}
	if out.KeyUsage != types.KeyUsageTypeSignVerify {
		return "", common.Address{}, fmt.Errorf("awskms: key %s has usage %s, not %s", ref, out.KeyUsage, types.KeyUsageTypeSignVerify)
	}
	if len(out.SigningAlgorithms) > 0 && !slices.Contains(out.SigningAlgorithms, types.SigningAlgorithmSpecEcdsaSha256) {
		return "", common.Address{}, fmt.Errorf("awskms: key %s does not offer %s", ref, types.SigningAlgorithmSpecEcdsaSha256)
	}
	pub, err := parsePublicKey(out.PublicKey)
	if err != nil {
		return "", common.Address{}, fmt.Errorf("awskms: key %s: %w", ref, err)
	}
	keyARN := aws.ToString(out.KeyId)
	if keyARN == "" {
		keyARN = ref
	}
	return keyARN, crypto.PubkeyToAddress(*pub), nil
}
