//go:build cgo

package pkcs11

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	p11 "github.com/miekg/pkcs11"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// idLen is the length of the random CKA_ID given to each key pair (its ref is its hex).
const idLen = 16

// keyLabel is the CKA_LABEL of a key web3gate makes: the prefix, then label.
func (b *Backend) keyLabel(label string) string {
	if label == "" {
		return b.cfg.LabelPrefix
	}
	return b.cfg.LabelPrefix + " " + label
}

// privateTemplate is the template of a private key: on the token, private (only a logged-in
// user sees it), sensitive and not extractable (its value never leaves the token, wrapped or
// not), good for signing only.
func privateTemplate(id []byte, label string) []*p11.Attribute {
	return []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PRIVATE_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_EC),
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_PRIVATE, true),
		p11.NewAttribute(p11.CKA_SENSITIVE, true),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, false),
		p11.NewAttribute(p11.CKA_SIGN, true),
		p11.NewAttribute(p11.CKA_DECRYPT, false),
		p11.NewAttribute(p11.CKA_UNWRAP, false),
		p11.NewAttribute(p11.CKA_DERIVE, false),
		p11.NewAttribute(p11.CKA_ID, id),
		p11.NewAttribute(p11.CKA_LABEL, label),
	}
}

// publicTemplate is the template of a public key on secp256k1, on the token and public.
func publicTemplate(id []byte, label string) []*p11.Attribute {
	return []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PUBLIC_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, p11.CKK_EC),
		p11.NewAttribute(p11.CKA_TOKEN, true),
		p11.NewAttribute(p11.CKA_PRIVATE, false),
		p11.NewAttribute(p11.CKA_VERIFY, true),
		p11.NewAttribute(p11.CKA_EC_PARAMS, secp256k1Params),
		p11.NewAttribute(p11.CKA_ID, id),
		p11.NewAttribute(p11.CKA_LABEL, label),
	}
}

// newID returns a random CKA_ID.
func newID() ([]byte, error) {
	id := make([]byte, idLen)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("random CKA_ID: %w", err)
	}
	return id, nil
}

// Generate makes a secp256k1 key pair on the token (CKM_EC_KEY_PAIR_GEN), the private key
// sensitive and not extractable (checked on the token after), signs a random digest with it
// to check it, and returns its reference (the hex of its CKA_ID) and address.
func (b *Backend) Generate(ctx context.Context, label string) (wallet.KeyRef, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	id, err := newID()
	if err != nil {
		return wallet.KeyRef{}, err
	}
	var addr common.Address
	err = b.retry(ctx, "generate a key", func(s *session) error {
		c := b.mod.ctx
		pub, priv, err := c.GenerateKeyPair(s.h, []*p11.Mechanism{p11.NewMechanism(p11.CKM_EC_KEY_PAIR_GEN, nil)},
			publicTemplate(id, b.keyLabel(label)), privateTemplate(id, b.keyLabel(label)))
		if err != nil {
			return fmt.Errorf("C_GenerateKeyPair: %w", err)
		}
		if addr, err = b.publicAddress(s, pub); err == nil {
			err = b.checkSealed(s, priv)
		}
		if err != nil {
			b.destroy(s, pub, priv)
			return err
		}
		if label == "" {
			// Name the key by its address for the token's operators (best effort).
			l := p11.NewAttribute(p11.CKA_LABEL, b.keyLabel(addr.Hex()))
			_ = c.SetAttributeValue(s.h, priv, []*p11.Attribute{l})
			_ = c.SetAttributeValue(s.h, pub, []*p11.Attribute{l})
		}
		return nil
	})
	if err != nil {
		return wallet.KeyRef{}, err
	}
	ref := wallet.KeyRef{Ref: hex.EncodeToString(id), Address: addr}
	if err := b.selfTest(ctx, ref); err != nil {
		return wallet.KeyRef{}, err
	}
	b.log.Info("PKCS#11 key generated", zap.String("token", b.name), zap.String("ref", ref.Ref),
		zap.Stringer("address", addr))
	return ref, nil
}

// Import creates priv on the token as a private key object (CKA_VALUE, sensitive and not
// extractable from then on: checked on the token after) with its public key object, signs a
// random digest with it to check it, and returns its reference and address. The caller
// removes the key from wherever it came from.
func (b *Backend) Import(ctx context.Context, priv *ecdsa.PrivateKey, label string) (wallet.KeyRef, error) {
	if priv == nil || priv.Curve != crypto.S256() {
		return wallet.KeyRef{}, errors.New("PKCS#11 import: not a secp256k1 private key")
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	id, err := newID()
	if err != nil {
		return wallet.KeyRef{}, err
	}
	addr := crypto.PubkeyToAddress(priv.PublicKey)
	if label == "" {
		label = addr.Hex()
	}
	d := make([]byte, 32)
	defer clear(d)
	priv.D.FillBytes(d)
	err = b.retry(ctx, "import a key", func(s *session) error {
		c := b.mod.ctx
		privT := append(privateTemplate(id, b.keyLabel(label)),
			p11.NewAttribute(p11.CKA_EC_PARAMS, secp256k1Params),
			p11.NewAttribute(p11.CKA_VALUE, d))
		privH, err := c.CreateObject(s.h, privT)
		if err != nil {
			return fmt.Errorf("C_CreateObject (private key): %w", err)
		}
		pubH, err := c.CreateObject(s.h, append(publicTemplate(id, b.keyLabel(label)),
			p11.NewAttribute(p11.CKA_EC_POINT, encodeECPoint(&priv.PublicKey))))
		if err != nil {
			b.destroy(s, privH)
			return fmt.Errorf("C_CreateObject (public key): %w", err)
		}
		var got common.Address
		if got, err = b.publicAddress(s, pubH); err == nil && got != addr {
			err = fmt.Errorf("the public key stored is %s's, not %s's", got.Hex(), addr.Hex())
		}
		if err == nil {
			err = b.checkSealed(s, privH)
		}
		if err != nil {
			b.destroy(s, pubH, privH)
			return err
		}
		return nil
	})
	if err != nil {
		return wallet.KeyRef{}, err
	}
	ref := wallet.KeyRef{Ref: hex.EncodeToString(id), Address: addr}
	if err := b.selfTest(ctx, ref); err != nil {
		return wallet.KeyRef{}, err
	}
	b.log.Info("PKCS#11 key imported", zap.String("token", b.name), zap.String("ref", ref.Ref),
		zap.Stringer("address", addr))
	return ref, nil
}

// Open returns the signer of the key whose CKA_ID is the hex ref, after checking that its
// public key is addr's.
func (b *Backend) Open(ctx context.Context, ref string, addr common.Address) (wallet.Signer, error) {
	return b.open(ctx, ref, addr)
}

func (b *Backend) open(ctx context.Context, ref string, addr common.Address) (*Signer, error) {
	id, err := hex.DecodeString(ref)
	if err != nil || len(id) == 0 || len(id) > 64 {
		return nil, fmt.Errorf("PKCS#11 key reference %q: not the hex of a CKA_ID", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	sg := &Signer{b: b, id: id, addr: addr}
	err = b.retry(ctx, "open key "+ref, func(s *session) error {
		pub, err := b.findKey(s, p11.CKO_PUBLIC_KEY, id)
		if err != nil {
			return err
		}
		got, err := b.publicAddress(s, pub)
		if err != nil {
			return err
		}
		if got != addr {
			return fmt.Errorf("the key is %s's, not %s's", got.Hex(), addr.Hex())
		}
		priv, err := b.findKey(s, p11.CKO_PRIVATE_KEY, id)
		if err != nil {
			return err
		}
		sg.remember(priv, s.gen)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sg, nil
}

// selfTest signs a random digest with the key of ref and checks the signature.
func (b *Backend) selfTest(ctx context.Context, ref wallet.KeyRef) error {
	sg, err := b.open(ctx, ref.Ref, ref.Address)
	if err != nil {
		return err
	}
	digest := make([]byte, 32)
	if _, err := rand.Read(digest); err != nil {
		return err
	}
	sig, err := sg.SignDigest(ctx, digest)
	if err == nil {
		err = wallet.VerifySignature(digest, sig, ref.Address)
	}
	if err != nil {
		return fmt.Errorf("%s: the new key %s does not sign: %w", b.name, ref.Ref, err)
	}
	return nil
}

// findKey returns the handle of the one key of class with CKA_ID id.
func (b *Backend) findKey(s *session, class uint, id []byte) (p11.ObjectHandle, error) {
	c := b.mod.ctx
	what := "private key"
	if class == p11.CKO_PUBLIC_KEY {
		what = "public key"
	}
	if err := c.FindObjectsInit(s.h, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, class),
		p11.NewAttribute(p11.CKA_ID, id),
	}); err != nil {
		return 0, fmt.Errorf("C_FindObjectsInit: %w", err)
	}
	found, _, err := c.FindObjects(s.h, 2)
	if ferr := c.FindObjectsFinal(s.h); err == nil && ferr != nil {
		err = ferr
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("C_FindObjects: %w", err)
	case len(found) == 0:
		if class == p11.CKO_PRIVATE_KEY && b.loggedOut(s) {
			return 0, errLoggedOut
		}
		return 0, fmt.Errorf("no %s with CKA_ID %x on the token", what, id)
	case len(found) > 1:
		return 0, fmt.Errorf("several %ss have CKA_ID %x on the token", what, id)
	}
	return found[0], nil
}

// errLoggedOut says that a session is no longer logged in: private keys are invisible in it.
var errLoggedOut = fmt.Errorf("the session is no longer logged in: %w", p11.Error(p11.CKR_USER_NOT_LOGGED_IN))

// loggedOut reports whether session s has lost its login (someone called C_Logout): then
// private keys are not found and their handles are invalid, though the key is there.
func (b *Backend) loggedOut(s *session) bool {
	info, err := b.mod.ctx.GetSessionInfo(s.h)
	return err == nil && (info.State == p11.CKS_RO_PUBLIC_SESSION || info.State == p11.CKS_RW_PUBLIC_SESSION)
}

// publicAddress returns the address of the public key object pub.
func (b *Backend) publicAddress(s *session, pub p11.ObjectHandle) (common.Address, error) {
	attrs, err := b.mod.ctx.GetAttributeValue(s.h, pub, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_EC_PARAMS, nil),
		p11.NewAttribute(p11.CKA_EC_POINT, nil),
	})
	if err != nil {
		return common.Address{}, fmt.Errorf("read the public key: C_GetAttributeValue: %w", err)
	}
	return addressOfECPoint(attrs[0].Value, attrs[1].Value)
}

// checkSealed checks on the token that the private key priv is sensitive and not
// extractable, and that the token refuses to read its value.
func (b *Backend) checkSealed(s *session, priv p11.ObjectHandle) error {
	c := b.mod.ctx
	attrs, err := c.GetAttributeValue(s.h, priv, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_SENSITIVE, nil),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, nil),
	})
	if err != nil {
		return fmt.Errorf("read the private key's attributes: C_GetAttributeValue: %w", err)
	}
	if !isTrue(attrs[0].Value) || isTrue(attrs[1].Value) || len(attrs[1].Value) != 1 {
		return fmt.Errorf("the token did not make the private key sensitive and not extractable "+
			"(CKA_SENSITIVE %x, CKA_EXTRACTABLE %x); the key was destroyed", attrs[0].Value, attrs[1].Value)
	}
	v, err := c.GetAttributeValue(s.h, priv, []*p11.Attribute{p11.NewAttribute(p11.CKA_VALUE, nil)})
	if err == nil && len(v) == 1 && len(v[0].Value) > 0 {
		clear(v[0].Value)
		return errors.New("the token gives out the private key's value (CKA_VALUE); the key was destroyed")
	}
	if err != nil && !errors.Is(err, p11.Error(p11.CKR_ATTRIBUTE_SENSITIVE)) {
		if _, isP11 := ckr(err); isP11 && isGone(err) {
			return err
		}
	}
	return nil
}

// isTrue reports whether a CK_BBOOL attribute value is true.
func isTrue(v []byte) bool { return len(v) == 1 && v[0] != 0 }

// destroy destroys objects (best effort), after a key turned out unusable.
func (b *Backend) destroy(s *session, objs ...p11.ObjectHandle) {
	for _, o := range objs {
		if err := b.mod.ctx.DestroyObject(s.h, o); err != nil {
			b.log.Warn("PKCS#11: could not destroy an unusable key object", zap.String("token", b.name), zap.Error(err))
		}
	}
}
