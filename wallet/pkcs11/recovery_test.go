//go:build cgo

package pkcs11_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/pkcs11"
	"github.com/web3gate/web3gate/wallet/pkcs11/softhsmtest"
)

// signOnce signs a random digest and returns the error (nil when the signature checks).
func signOnce(t *testing.T, sg wallet.Signer) error {
	t.Helper()
	d := randomDigest(t)
	sig, err := sg.SignDigest(context.Background(), d)
	if err == nil {
		err = wallet.VerifySignature(d, sig, sg.Address())
	}
	return err
}

// recoveryBackend is newBackend with its logs observed.
func recoveryBackend(t *testing.T) (*pkcs11.Backend, *pkcs11.Signer, *observer.ObservedLogs, pkcs11.Config) {
	cfg := softhsmtest.Token(t)
	core, logs := observer.New(zap.InfoLevel)
	b, err := pkcs11.New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	_, sg := generate(t, b)
	return b, sg, logs, cfg
}

// TestRecoverSessionsClosed: every session of the process on the token is closed under the
// backend (C_CloseAllSessions on its slot), which logs the user out too.
func TestRecoverSessionsClosed(t *testing.T) {
	b, sg, logs, _ := recoveryBackend(t)
	mustSign(t, sg)
	gen := b.Generation()
	if err := b.CloseAllSessions(); err != nil {
		t.Fatal(err)
	}
	// The next signature meets CKR_SESSION_HANDLE_INVALID, drops the pool and succeeds on a
	// new session after logging in again.
	if err := signOnce(t, sg); err != nil {
		t.Fatalf("first signature after C_CloseAllSessions: %v", err)
	}
	mustSign(t, sg)
	if b.Generation() != gen+1 {
		t.Fatalf("generation %d, want %d", b.Generation(), gen+1)
	}
	checkLogs(t, logs, "CKR_SESSION_HANDLE_INVALID")
}

// TestRecoverLoggedOut: the user is logged out (C_Logout) under the backend: private keys
// vanish from the sessions.
func TestRecoverLoggedOut(t *testing.T) {
	b, sg, logs, _ := recoveryBackend(t)
	mustSign(t, sg)
	if err := b.Logout(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := signOnce(t, sg); err != nil {
		t.Fatalf("first signature after C_Logout: %v", err)
	}
	mustSign(t, sg)
	checkLogs(t, logs, "CKR_USER_NOT_LOGGED_IN")
}

// TestRecoverFinalized: the library is finalised under the backend (C_Finalize): every
// session, login and handle is gone, calls answer CKR_CRYPTOKI_NOT_INITIALIZED until the
// library is initialised again, and SoftHSM renumbers its slots.
func TestRecoverFinalized(t *testing.T) {
	b, sg, logs, _ := recoveryBackend(t)
	mustSign(t, sg)
	if err := b.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := signOnce(t, sg); err != nil {
		t.Fatalf("first signature after C_Finalize: %v", err)
	}
	mustSign(t, sg)
	checkLogs(t, logs, "CKR_CRYPTOKI_NOT_INITIALIZED")
}

// TestTokenGoneAndBack: the token goes away (its files moved out of SoftHSM's token
// directory, and the library finalised: SoftHSM reads its tokens at C_Initialize, as an
// HSM that restarts). Signatures fail with ErrSignerUnavailable naming the token, until the
// token is back (files moved back; the library finalised again so that SoftHSM reads them).
func TestTokenGoneAndBack(t *testing.T) {
	b, sg, logs, cfg := recoveryBackend(t)
	mustSign(t, sg)
	dir := tokenDirOf(t, cfg.TokenLabel)
	away := filepath.Join(t.TempDir(), "away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	if err := b.Finalize(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		err := signOnce(t, sg)
		t.Logf("signature %d while the token is gone: %v", i, err)
		if !errors.Is(err, wallet.ErrSignerUnavailable) || !strings.Contains(err.Error(), cfg.TokenLabel) ||
			!strings.Contains(err.Error(), "not found") {
			t.Fatalf("signature %d while the token is gone: %v", i, err)
		}
	}
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	if err := b.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := signOnce(t, sg); err != nil {
		t.Fatalf("first signature with the token back: %v", err)
	}
	mustSign(t, sg)
	checkLogs(t, logs, "available again")
}

// tokenDirOf returns the directory of the token labelled label.
func tokenDirOf(t *testing.T, label string) string {
	root := softhsmtest.TokenDir(t)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "token.object"))
		if err == nil && strings.Contains(string(b), label) {
			return filepath.Join(root, e.Name())
		}
	}
	t.Fatalf("no token directory for %q", label)
	return ""
}

// checkLogs fails t unless a log entry mentions want.
func checkLogs(t *testing.T, logs *observer.ObservedLogs, want string) {
	t.Helper()
	var all []string
	for _, l := range logs.All() {
		line := l.Message
		for _, f := range l.Context {
			if f.Interface != nil {
				if err, ok := f.Interface.(error); ok {
					line += " " + f.Key + "=" + err.Error()
					continue
				}
			}
			line += " " + f.Key + "=" + f.String
		}
		all = append(all, line)
		if strings.Contains(line, want) {
			return
		}
	}
	t.Fatalf("no log mentions %s:\n%s", want, strings.Join(all, "\n"))
}
