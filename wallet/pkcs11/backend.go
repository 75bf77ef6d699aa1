//go:build cgo

package pkcs11

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	p11 "github.com/miekg/pkcs11"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// adminTimeout bounds Generate, Import and Open (each also bounded by its ctx): making a key
// may take an HSM longer than a signature.
const adminTimeout = 30 * time.Second

// Backend is the PKCS#11 key backend: keys on one token, signed with through a session pool.
// It is safe for concurrent use.
type Backend struct {
	cfg    Config
	log    *zap.Logger
	mod    *module
	pin    *pin
	pinSrc string // where the PIN came from, for messages
	name   string // the token, for messages
	pool   *pool
}

var _ wallet.KeyBackend = (*Backend)(nil)

// New loads cfg.Module (once per process), finds the token, opens a first session and logs
// in as the user, so that a wrong module, token or PIN fails here; further sessions are
// opened as signatures need them, up to cfg.Sessions. Unset fields of cfg take their
// defaults. log may be nil.
func New(cfg Config, log *zap.Logger) (*Backend, error) {
	if log == nil {
		log = zap.NewNop()
	}
	cfg.SetDefaults()
	if !cfg.Enabled() {
		return nil, errors.New("PKCS#11 backend: module is not set")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("PKCS#11 backend configuration: %w", err)
	}
	pin, src, err := resolvePIN(cfg)
	if err != nil {
		return nil, err
	}
	mod, err := loadModule(cfg.Module)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, log: log, mod: mod, pin: pin, pinSrc: src, name: cfg.tokenName()}
	b.pool = newPool(b, cfg.Sessions)
	s, err := b.pool.connect()
	if err != nil {
		return nil, err
	}
	b.pool.put(s, nil)
	log.Info("PKCS#11 token ready", zap.String("token", b.name), zap.String("module", cfg.Module),
		zap.Uint("slot", b.pool.slot), zap.String("pin", src), zap.Int("sessions", cfg.Sessions),
		zap.Duration("signTimeout", cfg.SignTimeout))
	return b, nil
}

// Name is wallet.BackendPKCS11.
func (b *Backend) Name() string { return wallet.BackendPKCS11 }

// Close closes the backend's sessions; calls still running close theirs when they return.
// The library stays loaded and initialised (other users in the process may share it).
func (b *Backend) Close() error {
	b.pool.shutdown()
	return nil
}

// findToken returns the slot of the configured token.
func (b *Backend) findToken() (uint, error) {
	c := b.mod.ctx
	if b.cfg.Slot != nil {
		slot := *b.cfg.Slot
		info, err := c.GetTokenInfo(slot)
		if err != nil {
			return 0, fmt.Errorf("%s: C_GetTokenInfo: %w", b.name, err)
		}
		return slot, b.checkToken(info)
	}
	slots, err := c.GetSlotList(true)
	if err != nil {
		return 0, fmt.Errorf("%s: C_GetSlotList: %w", b.name, err)
	}
	var found []uint
	var labels []string
	for _, slot := range slots {
		info, err := c.GetTokenInfo(slot)
		if err != nil {
			continue // removed meanwhile
		}
		if info.Label == b.cfg.TokenLabel {
			found = append(found, slot)
			if err := b.checkToken(info); err != nil {
				return 0, err
			}
		} else if info.Flags&p11.CKF_TOKEN_INITIALIZED != 0 {
			labels = append(labels, fmt.Sprintf("%q", info.Label))
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		slices.Sort(labels)
		return 0, fmt.Errorf("%s not found in module %s (tokens present: %v)", b.name, b.cfg.Module, labels)
	default:
		return 0, fmt.Errorf("%s: %d tokens have this label (slots %v); configure slot instead",
			b.name, len(found), found)
	}
}

// checkToken checks that the token is initialised and has a user PIN.
func (b *Backend) checkToken(info p11.TokenInfo) error {
	switch {
	case info.Flags&p11.CKF_TOKEN_INITIALIZED == 0:
		return fmt.Errorf("%s is not initialised", b.name)
	case info.Flags&p11.CKF_USER_PIN_INITIALIZED == 0:
		return fmt.Errorf("%s has no user PIN yet (its security officer sets it: C_InitPIN)", b.name)
	}
	return nil
}

// login finds the token, opens a session on it and logs in as the user: the login holds for
// every session of the process on the token until the last one is closed. It returns the
// slot and the session.
func (b *Backend) login() (uint, p11.SessionHandle, error) {
	c := b.mod.ctx
	slot, err := b.findToken()
	if err != nil {
		return 0, 0, err
	}
	h, err := c.OpenSession(slot, p11.CKF_SERIAL_SESSION|p11.CKF_RW_SESSION)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: C_OpenSession: %w", b.name, err)
	}
	err = c.Login(h, p11.CKU_USER, b.pin.v)
	if err == nil || errors.Is(err, p11.Error(p11.CKR_USER_ALREADY_LOGGED_IN)) {
		return slot, h, nil
	}
	_ = c.CloseSession(h)
	code, _ := ckr(err)
	switch code {
	case p11.CKR_PIN_INCORRECT:
		return 0, 0, fmt.Errorf("log in to %s: the PIN from %s is incorrect (CKR_PIN_INCORRECT)", b.name, b.pinSrc)
	case p11.CKR_PIN_LOCKED:
		return 0, 0, fmt.Errorf("log in to %s: the user PIN is locked after too many wrong tries; "+
			"the token's security officer must unlock it (CKR_PIN_LOCKED)", b.name)
	case p11.CKR_PIN_EXPIRED:
		return 0, 0, fmt.Errorf("log in to %s: the user PIN has expired; set a new one (CKR_PIN_EXPIRED)", b.name)
	case p11.CKR_PIN_LEN_RANGE:
		return 0, 0, fmt.Errorf("log in to %s: the PIN from %s has a length the token refuses "+
			"(CKR_PIN_LEN_RANGE)", b.name, b.pinSrc)
	}
	return 0, 0, fmt.Errorf("log in to %s (PIN from %s): %w", b.name, b.pinSrc, err)
}

// opError wraps err, the failure of op: with the token's name, and as
// wallet.ErrSignerUnavailable when it says the token is gone for now.
func (b *Backend) opError(op string, err error) error {
	if !errors.Is(err, wallet.ErrSignerUnavailable) && (isGone(err) || isStaleHandle(err)) {
		return fmt.Errorf("%s: %s: %w: %w (its sessions were dropped and are opened again, logging in, "+
			"on the next call)", b.name, op, wallet.ErrSignerUnavailable, err)
	}
	return fmt.Errorf("%s: %s: %w", b.name, op, err)
}

// retry runs fn on a pooled session within ctx, once more when the first try meets a token,
// session or login that went away (the pool has dropped its sessions: the second try finds
// the token and logs in again) or a stale object handle.
func (b *Backend) retry(ctx context.Context, op string, fn func(*session) error) error {
	err := b.pool.do(ctx, fn)
	if err != nil && (isGone(err) || isStaleHandle(err)) && ctx.Err() == nil {
		b.log.Info("PKCS#11 call failed; retrying on a new session", zap.String("token", b.name),
			zap.String("op", op), zap.Error(err))
		err = b.pool.do(ctx, fn)
	}
	if err != nil {
		return b.opError(op, err)
	}
	return nil
}
