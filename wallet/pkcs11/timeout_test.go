//go:build cgo

package pkcs11_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/pkcs11"
)

// TestSignTimeout makes the token slow for real: the pool's only session runs an RSA-4096
// key pair generation (seconds on SoftHSM2) through the pool, as a signature would. The
// call's caller gives up at its deadline with ErrSignerUnavailable while the session stays
// busy; a signature meanwhile waits for a session until signTimeout and fails the same way;
// once the token answers, the session is back in the pool and signatures work.
func TestSignTimeout(t *testing.T) {
	const signTimeout = 200 * time.Millisecond
	b, _ := newBackend(t, func(c *pkcs11.Config) { c.Sessions = 1; c.SignTimeout = signTimeout })
	_, sg := generate(t, b)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err, done := b.SlowCall(ctx, 4096)
	el := time.Since(start)
	select {
	case <-done:
		t.Fatalf("RSA-4096 generation took %s: too fast to make the token slow", el)
	default:
	}
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("slow call: %v", err)
	}
	if el > 300*time.Millisecond {
		t.Fatalf("the slow call's caller waited %s past its 100ms deadline", el)
	}

	start = time.Now()
	_, err = sg.SignDigest(context.Background(), randomDigest(t))
	el = time.Since(start)
	t.Logf("signature while the only session is busy: %s after %s", err, el)
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), "none of its 1 sessions became free") {
		t.Fatalf("signature while the only session is busy: %v", err)
	}
	if el < signTimeout || el > signTimeout+300*time.Millisecond {
		t.Fatalf("signature gave up after %s; signTimeout is %s", el, signTimeout)
	}

	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("RSA generation did not end in a minute")
	}
	t.Logf("RSA-4096 generation took %s", time.Since(start)+100*time.Millisecond)
	// The session comes back when the call returns (just after done): wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for b.IdleSessions() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := b.IdleSessions(); n != 1 {
		t.Fatalf("%d idle sessions after the slow call; want its session back", n)
	}
	mustSign(t, sg)
}

// TestSignContextDone: a signature asked with a context that has ended fails at once.
func TestSignContextDone(t *testing.T) {
	b, _ := newBackend(t, nil)
	_, sg := generate(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := sg.SignDigest(ctx, randomDigest(t))
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("sign with a cancelled context: %v", err)
	}
	if _, err := sg.SignDigest(context.Background(), make([]byte, 31)); err == nil ||
		errors.Is(err, wallet.ErrSignerUnavailable) {
		t.Fatalf("a 31-byte digest: %v", err)
	}
	mustSign(t, sg)
}

// BenchmarkSign measures signatures per second through the pool (SoftHSM2, 8 sessions), each
// converted and checked (wallet.SignatureFromRaw recovers the public key).
func BenchmarkSign(b *testing.B) {
	be, _ := newBackend(b, nil)
	_, sg := generate(b, be)
	d := randomDigest(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := sg.SignDigest(context.Background(), d); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sigs/s")
}
