//go:build cgo

package pkcs11

import (
	"context"
	"fmt"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	p11 "github.com/miekg/pkcs11"

	"github.com/web3gate/web3gate/wallet"
)

// ecdsaMech is CKM_ECDSA: ECDSA over data given as is (the 32-byte digest), answering r || s.
var ecdsaMech = []*p11.Mechanism{p11.NewMechanism(p11.CKM_ECDSA, nil)}

// Signer signs with one key of the token. It is safe for concurrent use.
type Signer struct {
	b    *Backend
	id   []byte
	addr common.Address

	mu     sync.Mutex
	handle p11.ObjectHandle // the private key's handle, found in pool generation gen
	gen    uint64
	known  bool
}

var _ wallet.Signer = (*Signer)(nil)

// Address is the key's address.
func (sg *Signer) Address() common.Address { return sg.addr }

// Backend is wallet.BackendPKCS11.
func (sg *Signer) Backend() string { return wallet.BackendPKCS11 }

// remember caches the private key's handle, found in generation gen.
func (sg *Signer) remember(h p11.ObjectHandle, gen uint64) {
	sg.mu.Lock()
	sg.handle, sg.gen, sg.known = h, gen, true
	sg.mu.Unlock()
}

// forget drops the cached handle h.
func (sg *Signer) forget(h p11.ObjectHandle) {
	sg.mu.Lock()
	if sg.handle == h {
		sg.known = false
	}
	sg.mu.Unlock()
}

// key returns the private key's handle for session s: the cached one when it was found in
// s's generation, else found again by CKA_ID (handles may not outlive the sessions that
// were dropped).
func (sg *Signer) key(s *session) (p11.ObjectHandle, error) {
	sg.mu.Lock()
	h, ok := sg.handle, sg.known && sg.gen == s.gen
	sg.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := sg.b.findKey(s, p11.CKO_PRIVATE_KEY, sg.id)
	if err != nil {
		return 0, err
	}
	sg.remember(h, s.gen)
	return h, nil
}

// SignDigest signs the 32-byte digest with CKM_ECDSA on a pooled session, within the
// backend's signTimeout and ctx, and returns Ethereum's [R || S || V] (low s, recovering to
// the address: wallet.SignatureFromRaw). A token that is gone, or does not answer in time,
// gives an error wrapping wallet.ErrSignerUnavailable; a call that met a dropped session or
// login is tried once more on a new one.
func (sg *Signer) SignDigest(ctx context.Context, digest []byte) ([]byte, error) {
	if len(digest) != common.HashLength {
		return nil, fmt.Errorf("digest must be %d bytes, got %d", common.HashLength, len(digest))
	}
	ctx, cancel := context.WithTimeout(ctx, sg.b.cfg.SignTimeout)
	defer cancel()
	var rs []byte
	err := sg.b.retry(ctx, "sign with key "+sg.addr.Hex(), func(s *session) error {
		h, err := sg.key(s)
		if err != nil {
			return err
		}
		if err := sg.b.mod.ctx.SignInit(s.h, ecdsaMech, h); err != nil {
			if isStaleHandle(err) {
				sg.forget(h)
				if sg.b.loggedOut(s) {
					return errLoggedOut
				}
			}
			return fmt.Errorf("C_SignInit: %w", err)
		}
		out, err := sg.b.mod.ctx.Sign(s.h, digest)
		if err != nil {
			return fmt.Errorf("C_Sign: %w", err)
		}
		rs = out
		return nil
	})
	if err != nil {
		return nil, err
	}
	sig, err := wallet.SignatureFromRaw(digest, rs, sg.addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sg.b.name, err)
	}
	return sig, nil
}
