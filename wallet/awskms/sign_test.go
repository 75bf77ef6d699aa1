package awskms

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/wallet"
)

// local-kms generates ECC_SECG_P256K1 keys and signs digests with them: every one of 100
// signatures, made Ethereum's, recovers to the account with s low.
func TestSignRecoversToAccount(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	ref, s := generate(t, b)
	if s.Address() != ref.Address || s.Backend() != wallet.BackendAWSKMS || b.Name() != wallet.BackendAWSKMS {
		t.Fatalf("signer %s/%s for ref %s", s.Address().Hex(), s.Backend(), ref.Address.Hex())
	}
	if !strings.HasPrefix(ref.Ref, "arn:aws:kms:") {
		t.Errorf("ref %q, want the key's ARN", ref.Ref)
	}
	for i := 0; i < 100; i++ {
		digest := randomDigest(t)
		sig, err := s.SignDigest(context.Background(), digest)
		if err != nil {
			t.Fatal(err)
		}
		if err := wallet.VerifySignature(digest, sig, ref.Address); err != nil {
			t.Fatalf("signature %d: %v", i, err)
		}
	}
}

// KMS's raw DER signatures, parsed, verify against the key's public key from GetPublicKey:
// the parser reads what a real KMS sends, and about half of them have a high s, which
// SignatureFromRS must move.
func TestKMSDERSignatures(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	ref, _ := generate(t, b)
	ctx := context.Background()
	pk, err := b.client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(ref.Ref)})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := parsePublicKey(pk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	high := 0
	const n = 40
	for i := 0; i < n; i++ {
		digest := randomDigest(t)
		out, err := b.client.Sign(ctx, &kms.SignInput{KeyId: aws.String(ref.Ref), Message: digest,
			MessageType: types.MessageTypeDigest, SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256})
		if err != nil {
			t.Fatal(err)
		}
		r, s, err := parseSignature(out.Signature)
		if err != nil {
			t.Fatalf("KMS signature %x: %v", out.Signature, err)
		}
		if !verifyK1(pub, digest, r, s) {
			t.Fatalf("KMS signature %d does not verify", i)
		}
		if s.Cmp(halfN) > 0 {
			high++
		}
		sig, err := wallet.SignatureFromRS(digest, r, s, ref.Address)
		if err != nil {
			t.Fatal(err)
		}
		if err := wallet.VerifySignature(digest, sig, ref.Address); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d KMS signatures had a high s", high, n)
	if high == 0 || high == n {
		t.Errorf("%d of %d high-s signatures: KMS should give both halves", high, n)
	}
}

// Many goroutines sign at once, more than the signing slots: all succeed and recover.
func TestConcurrentSign(t *testing.T) {
	b := newBackend(t, startKMS(t), func(c *Config) { c.MaxConcurrentSigns = 4 })
	ref, s := generate(t, b)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				digest := randomDigest(t)
				sig, err := s.SignDigest(context.Background(), digest)
				if err == nil {
					err = wallet.VerifySignature(digest, sig, ref.Address)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Open checks the address: a key opened for another account is refused, before any
// signature and again when the signer is cached.
func TestOpenWrongAddress(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	ctx := context.Background()
	ref, err := b.Generate(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	other := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	if _, err := b.Open(ctx, ref.Ref, other); err == nil || !strings.Contains(err.Error(), "not of "+other.Hex()) {
		t.Fatalf("Open with another address: %v", err)
	}
	if _, err := b.Open(ctx, ref.Ref, ref.Address); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, ref.Ref, other); err == nil { // from the cache now
		t.Fatal("cached signer opened for another address")
	}
}

// A key on another curve cannot hold an account: Open refuses it, naming its spec. Its
// signatures still exercise the DER parser against a KMS: they verify with the standard
// library's P-256.
func TestOpenRefusesP256(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	ctx := context.Background()
	out, err := b.client.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	keyID := aws.ToString(out.KeyMetadata.Arn)
	_, err = b.Open(ctx, keyID, common.Address{1})
	if err == nil || !strings.Contains(err.Error(), "ECC_NIST_P256") {
		t.Fatalf("Open of a P-256 key: %v", err)
	}
	pk, err := b.client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parsePublicKey(pk.PublicKey); err == nil || !strings.Contains(err.Error(), "P-256") {
		t.Fatalf("parsePublicKey of a P-256 key: %v", err)
	}
	verifyP256Signatures(t, b, keyID, pk.PublicKey)
}

// A key that KMS refuses to use (disabled, missing) gives ErrKeyRefused, not
// ErrSignerUnavailable: retrying will not help.
func TestKeyRefused(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	ctx := context.Background()
	ref, s := generate(t, b)
	if _, err := b.client.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(ref.Ref)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.SignDigest(ctx, randomDigest(t))
	if !errors.Is(err, ErrKeyRefused) || errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), ref.Ref) {
		t.Fatalf("sign with a disabled key: %v", err)
	}
	t.Log(err)
	missing := strings.Replace(ref.Ref, ref.Ref[len(ref.Ref)-36:], "00000000-0000-0000-0000-000000000000", 1)
	_, err = b.Open(ctx, missing, ref.Address)
	if !errors.Is(err, ErrKeyRefused) {
		t.Fatalf("open a missing key: %v", err)
	}
	t.Log(err)
}

// Generate names the key with an alias when keyAliasPrefix is set; the alias opens it.
func TestGenerateAliasAndTags(t *testing.T) {
	b := newBackend(t, startKMS(t), func(c *Config) {
		c.KeyAliasPrefix = "web3gate/test-"
		c.Tags = map[string]string{"team": "payments"}
	})
	ctx := context.Background()
	ref, err := b.Generate(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	alias := "alias/web3gate/test-" + strings.ToLower(ref.Address.Hex())
	s, err := b.Open(ctx, alias, ref.Address)
	if err != nil {
		t.Fatal(err)
	}
	if s.(*Signer).KeyID() != ref.Ref {
		t.Errorf("alias resolved to %s, want %s", s.(*Signer).KeyID(), ref.Ref)
	}
	tags, err := b.client.ListResourceTags(ctx, &kms.ListResourceTagsInput{KeyId: aws.String(ref.Ref)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tag := range tags.Tags {
		got[aws.ToString(tag.TagKey)] = aws.ToString(tag.TagValue)
	}
	if got["team"] != "payments" || got[labelTag] != "alice" {
		t.Errorf("tags %v", got)
	}
	digest := randomDigest(t)
	sig, err := s.SignDigest(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := wallet.VerifySignature(digest, sig, ref.Address); err != nil {
		t.Fatal(err)
	}
}

func TestImportUnsupported(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	priv, _ := crypto.GenerateKey()
	if _, err := b.Import(context.Background(), priv, "x"); !errors.Is(err, wallet.ErrImportUnsupported) {
		t.Fatalf("Import: %v", err)
	}
}

func TestClosed(t *testing.T) {
	b := newBackend(t, startKMS(t), nil)
	_, s := generate(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignDigest(context.Background(), randomDigest(t)); err == nil {
		t.Fatal("signed after Close")
	}
}
