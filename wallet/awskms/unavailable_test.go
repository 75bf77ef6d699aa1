package awskms

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/awskms/localkmstest"
)

// slack is what a failure may take past signTimeout: the SDK noticing its context's end, on
// a busy 2-core machine.
const slack = 500 * time.Millisecond

// A KMS that stops answering mid-run: every signature in flight, and a burst of new ones,
// fail with ErrSignerUnavailable within signTimeout plus a little; when KMS answers again,
// the same signer signs again. A KMS that refuses connections fails them sooner.
func TestStalledKMS(t *testing.T) {
	proxy := localkmstest.Proxy(t, startKMS(t))
	const timeout = time.Second
	b := newBackend(t, proxy.Endpoint(), func(c *Config) { c.SignTimeout = timeout })
	ref, s := generate(t, b)
	mustSign(t, s, ref.Address)

	proxy.Stall()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < cap(errs); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, err := s.SignDigest(context.Background(), randomDigest(t))
			if took := time.Since(start); took > timeout+slack || took < timeout-slack {
				t.Errorf("a stalled signature failed after %s, want about %s", took, timeout)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), "within signTimeout 1s") ||
			!strings.Contains(err.Error(), ref.Ref) {
			t.Fatalf("stalled KMS: %v", err)
		}
	}

	// The caller's own deadline, shorter than signTimeout, is said to be the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := s.SignDigest(ctx, randomDigest(t))
	cancel()
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), "the request ended") {
		t.Fatalf("stalled KMS, caller's deadline: %v", err)
	}

	proxy.Resume()
	mustSign(t, s, ref.Address)

	proxy.Refuse()
	start := time.Now()
	_, err = s.SignDigest(context.Background(), randomDigest(t))
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("KMS refusing connections: %v", err)
	}
	if took := time.Since(start); took > timeout {
		t.Errorf("a refused connection took %s to fail", took)
	}
	t.Log(err)

	proxy.Resume()
	mustSign(t, s, ref.Address)
}

// With every signing slot held by a stalled call, another signature waits for a slot only
// as long as its context allows, and says why it failed.
func TestSigningSlotsBusy(t *testing.T) {
	proxy := localkmstest.Proxy(t, startKMS(t))
	b := newBackend(t, proxy.Endpoint(), func(c *Config) { c.SignTimeout = time.Second; c.MaxConcurrentSigns = 1 })
	ref, s := generate(t, b)
	proxy.Stall()
	held := make(chan error, 1)
	go func() { _, err := s.SignDigest(context.Background(), randomDigest(t)); held <- err }()
	time.Sleep(100 * time.Millisecond) // the first call takes the slot
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := s.SignDigest(ctx, randomDigest(t))
	cancel()
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), "1 signing slots stayed busy") {
		t.Fatalf("no free slot: %v", err)
	}
	if err := <-held; !errors.Is(err, wallet.ErrSignerUnavailable) {
		t.Fatalf("stalled call: %v", err)
	}
	proxy.Resume()
	mustSign(t, s, ref.Address)
}

func mustSign(t *testing.T, s wallet.Signer, addr interface{ Hex() string }) {
	t.Helper()
	digest := randomDigest(t)
	sig, err := s.SignDigest(context.Background(), digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := wallet.VerifySignature(digest, sig, s.Address()); err != nil || s.Address().Hex() != addr.Hex() {
		t.Fatalf("signature for %s: %v", addr.Hex(), err)
	}
}
