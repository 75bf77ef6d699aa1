package awskms

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/awskms/localkmstest"
)

// newBackend starts local-kms for t and returns a backend on it (or on endpoint, when given,
// e.g. a proxy in front of it), cfg's defaults set after mutate.
func newBackend(t testing.TB, endpoint string, mutate func(*Config)) *Backend {
	t.Helper()
	cfg := Config{Enabled: true, Endpoint: endpoint}
	if mutate != nil {
		mutate(&cfg)
	}
	cfg.SetDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// generate makes a key and opens its signer.
func generate(t testing.TB, b *Backend) (wallet.KeyRef, wallet.Signer) {
	t.Helper()
	ctx := context.Background()
	ref, err := b.Generate(ctx, "test key")
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Open(ctx, ref.Ref, ref.Address)
	if err != nil {
		t.Fatal(err)
	}
	return ref, s
}

func randomDigest(t testing.TB) []byte {
	d := make([]byte, 32)
	if _, err := rand.Read(d); err != nil {
		t.Fatal(err)
	}
	return d
}

// startKMS is localkmstest.Start, named here for the reader.
func startKMS(t testing.TB) string { return localkmstest.Start(t) }
