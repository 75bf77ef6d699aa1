//go:build cgo

package pkcs11

import (
	"context"
	"errors"
	"fmt"
	"sync"

	p11 "github.com/miekg/pkcs11"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// A session is one PKCS#11 session of the pool, opened in generation gen.
type session struct {
	h   p11.SessionHandle
	gen uint64
}

// pool holds the backend's sessions: at most cap(sem) in use at once, opened as needed and
// kept idle between uses. A session runs one call at a time; one whose call did not return
// in time stays out of the pool until it does.
//
// Generations: when the token answers that a session, the login or the token itself is gone
// (isGone), the pool drops its idle sessions and starts a new generation; sessions of an
// older generation are closed when their call returns, instead of going back to the pool,
// and object handles found in them are found again. The first session of a generation finds
// the token again (its slot may have changed) and logs in.
type pool struct {
	b   *Backend
	sem chan struct{}

	connMu sync.Mutex // serialises connecting (finding the token, logging in)

	mu     sync.Mutex
	gen    uint64
	ready  bool // the token's slot is known and the user is logged in, for gen
	slot   uint
	idle   []*session
	closed bool
}

var errClosed = errors.New("the PKCS#11 backend is closed")

func newPool(b *Backend, size int) *pool {
	return &pool{b: b, sem: make(chan struct{}, size)}
}

// do runs fn on a session of the pool, within ctx. When ctx ends before a session is free
// or before fn returns, do answers an error wrapping wallet.ErrSignerUnavailable; fn goes on
// in the background and its session returns to the pool (or is closed) when it does. Errors
// finding the token or logging in wrap wallet.ErrSignerUnavailable; fn's are returned as
// they are, after the pool has dealt with them (a session that met an error is closed; one
// that says the token is gone drops the pool's sessions).
func (p *pool) do(ctx context.Context, fn func(*session) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", wallet.ErrSignerUnavailable, context.Cause(ctx))
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: none of its %d sessions became free in time: %w",
			wallet.ErrSignerUnavailable, cap(p.sem), context.Cause(ctx))
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-p.sem }()
		s, err := p.get()
		if err != nil {
			done <- fmt.Errorf("%w: %w", wallet.ErrSignerUnavailable, err)
			return
		}
		err = fn(s)
		p.put(s, err)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done: // both ready: the answer wins
			return err
		default:
		}
		return fmt.Errorf("%w: the token did not answer in time (its session is kept out of the "+
			"pool until it does): %w", wallet.ErrSignerUnavailable, context.Cause(ctx))
	}
}

// get returns an idle session, or opens one (connecting first if needed).
func (p *pool) get() (*session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	gen, ready, slot := p.gen, p.ready, p.slot
	p.mu.Unlock()
	if !ready {
		return p.connect()
	}
	return p.open(gen, slot)
}

// open opens a new session of generation gen on slot.
func (p *pool) open(gen uint64, slot uint) (*session, error) {
	h, err := p.b.mod.ctx.OpenSession(slot, p11.CKF_SERIAL_SESSION|p11.CKF_RW_SESSION)
	if err != nil {
		if isGone(err) {
			p.drop(gen, err)
		}
		return nil, fmt.Errorf("%s: C_OpenSession: %w", p.b.name, err)
	}
	return &session{h: h, gen: gen}, nil
}

// connect finds the token and logs in, once per generation, and returns the session it did
// it with.
func (p *pool) connect() (*session, error) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	p.mu.Lock()
	gen, ready, slot, closed := p.gen, p.ready, p.slot, p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return nil, errClosed
	case ready: // connected while this call waited
		return p.open(gen, slot)
	}
	slot, h, err := p.b.login()
	if err != nil && isNotInitialized(err) {
		// The library was finalised under us: initialise it again, once.
		if err := p.b.mod.initialize(); err != nil {
			return nil, err
		}
		slot, h, err = p.b.login()
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.gen != gen || p.closed {
		p.mu.Unlock()
		_ = p.b.mod.ctx.CloseSession(h)
		return nil, fmt.Errorf("%s: the sessions were dropped while logging in", p.b.name)
	}
	p.ready, p.slot = true, slot
	p.mu.Unlock()
	if gen > 0 {
		p.b.log.Info("PKCS#11 token available again: found and logged in",
			zap.String("token", p.b.name), zap.Uint("slot", slot))
	}
	return &session{h: h, gen: gen}, nil
}

// put returns s to the pool after a call that answered err. A session that met a PKCS#11
// error is closed (it may hold an unfinished operation); one whose error says the token,
// the sessions or the login are gone drops the pool's sessions.
func (p *pool) put(s *session, err error) {
	if _, isP11 := ckr(err); isP11 {
		if isGone(err) {
			p.drop(s.gen, err)
		}
		p.close(s, err)
		return
	}
	p.mu.Lock()
	if !p.closed && s.gen == p.gen {
		p.idle = append(p.idle, s)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.close(s, nil)
}

// drop starts a new generation after err said that the token, the sessions or the login of
// generation gen are gone (unless that is done already): the idle sessions are closed, and
// the next call finds the token and logs in again.
func (p *pool) drop(gen uint64, err error) {
	p.mu.Lock()
	if gen != p.gen {
		p.mu.Unlock()
		return
	}
	p.gen++
	p.ready = false
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, s := range idle {
		p.close(s, err)
	}
	p.b.log.Warn("PKCS#11 token unavailable: sessions dropped; they are opened again (finding the "+
		"token and logging in) on the next call", zap.String("token", p.b.name), zap.Error(err))
}

// close closes s, after err. When err says sessions were closed or the token is gone, s is
// closed only if the token still knows it as one of this slot's: session handles may be
// reused, and closing a stale one could close another user's session.
func (p *pool) close(s *session, err error) {
	c := p.b.mod.ctx
	if code, ok := ckr(err); ok {
		switch code {
		case p11.CKR_SESSION_HANDLE_INVALID, p11.CKR_SESSION_CLOSED, p11.CKR_DEVICE_REMOVED,
			p11.CKR_TOKEN_NOT_PRESENT, p11.CKR_CRYPTOKI_NOT_INITIALIZED:
			p.mu.Lock()
			slot := p.slot
			p.mu.Unlock()
			info, ierr := c.GetSessionInfo(s.h)
			if ierr != nil || info.SlotID != slot {
				return
			}
		}
	}
	_ = c.CloseSession(s.h)
}

// shutdown closes the idle sessions and refuses new calls; sessions in use are closed when
// their calls return.
func (p *pool) shutdown() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, s := range idle {
		p.close(s, nil)
	}
}
