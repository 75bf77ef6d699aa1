//go:build cgo

package pkcs11_test

import (
	"context"
	"crypto/rand"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	p11 "github.com/miekg/pkcs11"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/pkcs11"
	"github.com/web3gate/web3gate/wallet/pkcs11/softhsmtest"
)

var halfN = new(big.Int).Rsh(crypto.S256().Params().N, 1)

// newBackend makes a token and a backend on it, closed when t ends.
func newBackend(t testing.TB, edit func(*pkcs11.Config)) (*pkcs11.Backend, pkcs11.Config) {
	t.Helper()
	cfg := softhsmtest.Token(t)
	if edit != nil {
		edit(&cfg)
	}
	b, err := pkcs11.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, cfg
}

// generate makes a key and opens its signer.
func generate(t testing.TB, b *pkcs11.Backend) (wallet.KeyRef, *pkcs11.Signer) {
	t.Helper()
	ctx := context.Background()
	ref, err := b.Generate(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := b.Open(ctx, ref.Ref, ref.Address)
	if err != nil {
		t.Fatal(err)
	}
	return ref, sg.(*pkcs11.Signer)
}

func randomDigest(t testing.TB) []byte {
	d := make([]byte, 32)
	if _, err := rand.Read(d); err != nil {
		t.Fatal(err)
	}
	return d
}

// mustSign signs a random digest and checks the signature.
func mustSign(t testing.TB, sg wallet.Signer) {
	t.Helper()
	d := randomDigest(t)
	sig, err := sg.SignDigest(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if err := wallet.VerifySignature(d, sig, sg.Address()); err != nil {
		t.Fatal(err)
	}
}

func TestGenerateAndSign(t *testing.T) {
	b, _ := newBackend(t, nil)
	ref, sg := generate(t, b)
	if b.Name() != wallet.BackendPKCS11 || sg.Backend() != wallet.BackendPKCS11 || sg.Address() != ref.Address {
		t.Fatalf("names: %s %s %s", b.Name(), sg.Backend(), sg.Address())
	}
	if len(ref.Ref) != 32 {
		t.Fatalf("ref %q: want the hex of a 16-byte CKA_ID", ref.Ref)
	}
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		d := randomDigest(t)
		sig, err := sg.SignDigest(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := wallet.VerifySignature(d, sig, ref.Address); err != nil {
			t.Fatalf("signature %d: %v", i, err)
		}
		if new(big.Int).SetBytes(sig[32:64]).Cmp(halfN) > 0 {
			t.Fatalf("signature %d has a high s", i)
		}
	}
	// The token answers high s about half the time: the conversion is what makes them low.
	high := 0
	for i := 0; i < 200; i++ {
		rs, err := sg.RawSign(ctx, randomDigest(t))
		if err != nil {
			t.Fatal(err)
		}
		if new(big.Int).SetBytes(rs[32:]).Cmp(halfN) > 0 {
			high++
		}
	}
	t.Logf("raw signatures from the token with a high s: %d of 200", high)
	if high == 0 {
		t.Fatal("the token never answered a high s: the low-s conversion is not exercised")
	}

	attrs, value, valueErr, err := b.KeyAttributes(ctx, ref.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if attrs["extractable"] || !attrs["sensitive"] || !attrs["neverExtractable"] || !attrs["alwaysSensitive"] ||
		!attrs["token"] || !attrs["private"] {
		t.Fatalf("generated key attributes %v", attrs)
	}
	if value != nil || !errors.Is(valueErr, p11.Error(p11.CKR_ATTRIBUTE_SENSITIVE)) {
		t.Fatalf("reading CKA_VALUE: %d bytes, err %v; want CKR_ATTRIBUTE_SENSITIVE", len(value), valueErr)
	}

	// A second backend (a restarted process) opens the key by its reference.
	b.Close()
	cfg := softhsmtest.Token(t) // another token: the key is not there
	other, err := pkcs11.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Open(ctx, ref.Ref, ref.Address); err == nil || !strings.Contains(err.Error(), "no public key with CKA_ID") {
		t.Fatalf("open on another token: %v", err)
	}
}

func TestReopenAfterRestart(t *testing.T) {
	cfg := softhsmtest.Token(t)
	b, err := pkcs11.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := b.Generate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b2, err := pkcs11.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	sg, err := b2.Open(context.Background(), ref.Ref, ref.Address)
	if err != nil {
		t.Fatal(err)
	}
	mustSign(t, sg)
}

func TestConcurrentSign(t *testing.T) {
	b, _ := newBackend(t, func(c *pkcs11.Config) { c.Sessions = 4 })
	_, sg := generate(t, b)
	const workers, each = 64, 50
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				d := make([]byte, 32)
				rand.Read(d)
				sig, err := sg.SignDigest(context.Background(), d)
				if err == nil {
					err = wallet.VerifySignature(d, sig, sg.Address())
				}
				if err != nil {
					if failed.Add(1) == 1 {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	t.Logf("%d signatures by %d goroutines on 4 sessions in %s: %.0f/s", workers*each, workers, el,
		float64(workers*each)/el.Seconds())
	if failed.Load() > 0 {
		t.Fatalf("%d signatures failed", failed.Load())
	}
	if n := b.IdleSessions(); n > 4 || n < 1 {
		t.Fatalf("%d idle sessions; want 1..4", n)
	}
}

func TestImport(t *testing.T) {
	b, _ := newBackend(t, nil)
	ctx := context.Background()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	raw := crypto.FromECDSA(key)
	ref, err := b.Import(ctx, key, "imported")
	if err != nil {
		t.Fatal(err)
	}
	if ref.Address != crypto.PubkeyToAddress(key.PublicKey) {
		t.Fatalf("address %s, want %s", ref.Address, crypto.PubkeyToAddress(key.PublicKey))
	}
	attrs, value, valueErr, err := b.KeyAttributes(ctx, ref.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if attrs["extractable"] || !attrs["sensitive"] || !attrs["token"] || !attrs["private"] {
		t.Fatalf("imported key attributes %v", attrs)
	}
	if value != nil || !errors.Is(valueErr, p11.Error(p11.CKR_ATTRIBUTE_SENSITIVE)) {
		t.Fatalf("reading CKA_VALUE: %d bytes, err %v; want CKR_ATTRIBUTE_SENSITIVE", len(value), valueErr)
	}
	sg, err := b.Open(ctx, ref.Ref, ref.Address)
	if err != nil {
		t.Fatal(err)
	}
	mustSign(t, sg)
	// SoftHSM2 encrypts the private objects of a token with a key that the user PIN unlocks:
	// the key's bytes must be in none of the token's files.
	softhsmtest.AssertNoKeyBytes(t, softhsmtest.TokenDir(t), raw)

	if _, err := b.Import(ctx, nil, ""); err == nil {
		t.Fatal("nil key imported")
	}
}

// TestAssertNoKeyBytes checks that the check finds a key where it is, in every form.
func TestAssertNoKeyBytes(t *testing.T) {
	key := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3}
	for name, content := range map[string][]byte{
		"raw":   append([]byte("x"), key...),
		"lower": []byte("k=deadbeef010203"),
		"upper": []byte("k=DEADBEEF010203"),
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "f"), content, 0o600)
		ft := &fakeT{TB: t}
		softhsmtest.AssertNoKeyBytes(ft, dir, key)
		if !ft.failed {
			t.Errorf("%s: not found", name)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("nothing"), 0o600)
	softhsmtest.AssertNoKeyBytes(t, dir, key)
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}

func TestOpenRefused(t *testing.T) {
	b, _ := newBackend(t, nil)
	ref, _ := generate(t, b)
	ctx := context.Background()
	other := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	_, err := b.Open(ctx, ref.Ref, other)
	if err == nil || !strings.Contains(err.Error(), "not "+other.Hex()) {
		t.Fatalf("open with a wrong address: %v", err)
	}
	if errors.Is(err, wallet.ErrSignerUnavailable) {
		t.Fatalf("a wrong address is not unavailability: %v", err)
	}
	if _, err := b.Open(ctx, "00112233", ref.Address); err == nil || !strings.Contains(err.Error(), "no public key") {
		t.Fatalf("open an unknown ref: %v", err)
	}
	if _, err := b.Open(ctx, "not hex", ref.Address); err == nil {
		t.Fatal("open a malformed ref")
	}
}

func TestWrongPIN(t *testing.T) {
	cfg := softhsmtest.Token(t)
	right, err := os.ReadFile(cfg.PINFile)
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "wrong-pin-4711"
	cfg.PINFile = filepath.Join(t.TempDir(), "pin")
	os.WriteFile(cfg.PINFile, []byte(wrong+"\n"), 0o600)
	core, logs := observer.New(zap.DebugLevel)
	_, err = pkcs11.New(cfg, zap.New(core))
	if err == nil {
		t.Fatal("logged in with a wrong PIN")
	}
	msg := err.Error()
	t.Log(msg)
	if !strings.Contains(msg, "incorrect") || !strings.Contains(msg, cfg.TokenLabel) || !strings.Contains(msg, cfg.PINFile) {
		t.Fatalf("message does not say the PIN from %s is incorrect for the token: %s", cfg.PINFile, msg)
	}
	for _, l := range logs.All() {
		msg += " " + l.Message
		for _, f := range l.Context {
			msg += " " + f.String
		}
	}
	if strings.Contains(msg, wrong) || strings.Contains(msg, strings.TrimSpace(string(right))) {
		t.Fatal("a PIN is in the error or the logs")
	}

	// The environment variable wins over the file.
	t.Setenv(cfg.PINEnv, strings.TrimSpace(string(right)))
	b, err := pkcs11.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

func TestPINFileMode(t *testing.T) {
	cfg := softhsmtest.Token(t)
	if err := os.Chmod(cfg.PINFile, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := pkcs11.New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a PIN file others can read: %v", err)
	}
	cfg.PINFile = ""
	if _, err := pkcs11.New(cfg, nil); err == nil || !strings.Contains(err.Error(), cfg.PINEnv) {
		t.Fatalf("no PIN: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	cfg := softhsmtest.Token(t)
	missing := cfg
	missing.TokenLabel = "no-such-token"
	if _, err := pkcs11.New(missing, nil); err == nil || !strings.Contains(err.Error(), `"no-such-token" not found`) {
		t.Fatalf("missing token: %v", err)
	}
	bad := cfg
	bad.Module = "/nonexistent/libpkcs11.so"
	if _, err := pkcs11.New(bad, nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/libpkcs11.so") {
		t.Fatalf("missing module: %v", err)
	}
	notLib := cfg
	notLib.Module = cfg.PINFile
	if _, err := pkcs11.New(notLib, nil); err == nil || !strings.Contains(err.Error(), "cannot load") {
		t.Fatalf("not a library: %v", err)
	}
	if _, err := pkcs11.New(pkcs11.Config{}, nil); err == nil {
		t.Fatal("no module")
	}
}

func TestClose(t *testing.T) {
	b, _ := newBackend(t, nil)
	_, sg := generate(t, b)
	b.Close()
	_, err := sg.SignDigest(context.Background(), randomDigest(t))
	if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("sign after Close: %v", err)
	}
}
