//go:build cgo

package pkcs11

import (
	"context"
	"encoding/hex"

	p11 "github.com/miekg/pkcs11"
)

// What the tests of package pkcs11_test reach inside (they cannot be in package pkcs11:
// softhsmtest imports it).

// Slot returns the token's slot, as the pool knows it.
func (b *Backend) Slot() uint {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return b.pool.slot
}

// CloseAllSessions calls C_CloseAllSessions on the token's slot: every session of the
// process on it ends, and the login with them.
func (b *Backend) CloseAllSessions() error { return b.mod.ctx.CloseAllSessions(b.Slot()) }

// Logout calls C_Logout on a session of the pool: the user is logged out of every session.
func (b *Backend) Logout(ctx context.Context) error {
	return b.pool.do(ctx, func(s *session) error {
		return b.mod.ctx.Logout(s.h)
	})
}

// Finalize calls C_Finalize on the library: every session and login of the process ends,
// and calls answer CKR_CRYPTOKI_NOT_INITIALIZED until it is initialised again.
func (b *Backend) Finalize() error { return b.mod.ctx.Finalize() }

// IdleSessions returns how many sessions the pool keeps idle.
func (b *Backend) IdleSessions() int {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return len(b.pool.idle)
}

// Generation returns the pool's generation (how many times it dropped its sessions).
func (b *Backend) Generation() uint64 {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return b.pool.gen
}

// SlowCall runs a real slow operation on a pooled session through the pool, within ctx:
// generating an RSA key pair of bits (a session object, gone with the session). done is
// closed when the token has answered.
func (b *Backend) SlowCall(ctx context.Context, bits int) (err error, done chan struct{}) {
	done = make(chan struct{})
	err = b.pool.do(ctx, func(s *session) error {
		defer close(done)
		pub, priv, err := b.mod.ctx.GenerateKeyPair(s.h,
			[]*p11.Mechanism{p11.NewMechanism(p11.CKM_RSA_PKCS_KEY_PAIR_GEN, nil)},
			[]*p11.Attribute{
				p11.NewAttribute(p11.CKA_TOKEN, false),
				p11.NewAttribute(p11.CKA_MODULUS_BITS, bits),
				p11.NewAttribute(p11.CKA_PUBLIC_EXPONENT, []byte{1, 0, 1}),
			},
			[]*p11.Attribute{p11.NewAttribute(p11.CKA_TOKEN, false)})
		if err == nil {
			b.destroy(s, pub, priv)
		}
		return err
	})
	return err, done
}

// KeyAttributes reads CKA_EXTRACTABLE, CKA_SENSITIVE, CKA_NEVER_EXTRACTABLE and
// CKA_ALWAYS_SENSITIVE of the private key of ref, and tries to read its CKA_VALUE: value is
// what the token gave, valueErr its refusal.
func (b *Backend) KeyAttributes(ctx context.Context, ref string) (attrs map[string]bool, value []byte, valueErr error, err error) {
	id, err := hex.DecodeString(ref)
	if err != nil {
		return nil, nil, nil, err
	}
	err = b.pool.do(ctx, func(s *session) error {
		h, err := b.findKey(s, p11.CKO_PRIVATE_KEY, id)
		if err != nil {
			return err
		}
		a, err := b.mod.ctx.GetAttributeValue(s.h, h, []*p11.Attribute{
			p11.NewAttribute(p11.CKA_EXTRACTABLE, nil),
			p11.NewAttribute(p11.CKA_SENSITIVE, nil),
			p11.NewAttribute(p11.CKA_NEVER_EXTRACTABLE, nil),
			p11.NewAttribute(p11.CKA_ALWAYS_SENSITIVE, nil),
			p11.NewAttribute(p11.CKA_TOKEN, nil),
			p11.NewAttribute(p11.CKA_PRIVATE, nil),
		})
		if err != nil {
			return err
		}
		attrs = map[string]bool{"extractable": isTrue(a[0].Value), "sensitive": isTrue(a[1].Value),
			"neverExtractable": isTrue(a[2].Value), "alwaysSensitive": isTrue(a[3].Value),
			"token": isTrue(a[4].Value), "private": isTrue(a[5].Value)}
		v, verr := b.mod.ctx.GetAttributeValue(s.h, h, []*p11.Attribute{p11.NewAttribute(p11.CKA_VALUE, nil)})
		if verr == nil {
			value = v[0].Value
		}
		valueErr = verr
		return nil
	})
	return attrs, value, valueErr, err
}

// RawSign signs digest with sg's key and returns the token's r || s as it is.
func (sg *Signer) RawSign(ctx context.Context, digest []byte) ([]byte, error) {
	var rs []byte
	err := sg.b.pool.do(ctx, func(s *session) error {
		h, err := sg.key(s)
		if err != nil {
			return err
		}
		if err := sg.b.mod.ctx.SignInit(s.h, ecdsaMech, h); err != nil {
			return err
		}
		rs, err = sg.b.mod.ctx.Sign(s.h, digest)
		return err
	})
	return rs, err
}
