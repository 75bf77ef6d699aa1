package wallet

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/web3gate/web3gate/store"
)

// storeConfig is the configuration of a light-scrypt key backend in the store whose
// passphrase is in testEnv. Its directory is never created.
func storeConfig(t *testing.T) KeysConfig {
	return KeysConfig{Backend: KeysBackendStore, Dir: filepath.Join(t.TempDir(), "no-keystore"), PassphraseEnv: testEnv, LightScrypt: true}
}

// openDB opens (creating) the SQLite store at path, closed when the test ends. Two DBs on
// one path are two processes sharing a store, as replicas do.
func openDB(t *testing.T, path string) *store.DB {
	t.Helper()
	cfg := testStoreConfig(t, path)
	cfg.SetDefaults()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openStoreKeys opens the keys kept in db with the passphrase pass in testEnv; keys it creates
// are encrypted with tiny scrypt parameters.
func openStoreKeys(t *testing.T, cfg KeysConfig, db *store.DB, pass string, log *zap.Logger) *Keys {
	t.Helper()
	t.Setenv(testEnv, pass)
	k, err := OpenKeys(cfg, Deps{Logger: log, Store: db})
	if err != nil {
		t.Fatalf("OpenKeys: %v", err)
	}
	k.scryptN, k.scryptP = tinyScryptN, tinyScryptP
	return k
}

// TestStoreBackendNewImportList: accounts created and imported with backend store are kept in
// the store (encrypted with the keystore passphrase, nothing in any directory), listed, and
// unlocked by a later process on the same store.
func TestStoreBackendNewImportList(t *testing.T) {
	ctx := context.Background()
	cfg := storeConfig(t)
	path := filepath.Join(t.TempDir(), "web3gate.db")
	db := openDB(t, path)
	keys := openStoreKeys(t, cfg, db, testPass, zaptest.NewLogger(t))
	a := NewAccounts(keys, db)

	created, err := a.Create(ctx, "alice")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	raw := mustKey(t)
	imported, err := a.ImportKey(ctx, "alice", raw)
	if err != nil {
		t.Fatalf("ImportKey: %v", err)
	}
	_, keyJSON := storeTinyKey(t, t.TempDir(), "file pass")
	fromFile, err := a.Import(ctx, "bob", keyJSON, "file pass")
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if _, err := a.ImportKey(ctx, "alice", raw); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second ImportKey: %v, want ErrKeyExists", err)
	}
	if _, err := a.Import(ctx, "alice", keyJSON, "file pass"); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("import of bob's key by alice: %v, want ErrHeldByOther", err)
	}

	list, err := a.List(ctx, "alice")
	if err != nil || len(list) != 2 || list[0].Address != created || list[1].Address != imported {
		t.Fatalf("alice's accounts = %+v, %v; want %s then %s", list, err, created, imported)
	}
	if _, err := os.Stat(cfg.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the keystore directory was touched with backend store: %v", err)
	}
	stored, err := db.AllKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3 {
		t.Fatalf("%d keys in the store, want 3", len(stored))
	}
	want := map[common.Address]*ecdsa.PrivateKey{imported: raw}
	for _, s := range stored {
		// Each row is a V3 key file encrypted with the keystore passphrase, as in a directory.
		key, err := keystore.DecryptKey(s.JSON, testPass)
		if err != nil || key.Address != s.Address {
			t.Fatalf("stored key of %s does not decrypt with the keystore passphrase: %v", s.Address, err)
		}
		if w, ok := want[s.Address]; ok && !key.PrivateKey.Equal(w) {
			t.Fatalf("stored key of %s is another key", s.Address)
		}
	}
	if has, err := HasKeyFiles(cfg, Deps{Store: db}); !has || err != nil {
		t.Fatalf("HasKeyFiles = %v, %v", has, err)
	}

	// A restart (or another replica): every key is unlocked at start.
	db2 := openDB(t, path)
	again := openStoreKeys(t, cfg, db2, testPass, zaptest.NewLogger(t))
	if got := again.Addresses(); len(got) != 3 {
		t.Fatalf("reopened: %d keys unlocked, want 3", len(got))
	}
	for _, addr := range []common.Address{created, imported, fromFile} {
		sig, err := signersOf(again).SignText(context.Background(), addr, []byte("hello"))
		if err != nil {
			t.Fatalf("reopened: SignText(%s): %v", addr, err)
		}
		checkSigner(t, sig, []byte("hello"), addr)
	}
}

// checkSigner checks that sig (SignText's) is addr's signature of msg.
func checkSigner(t *testing.T, sig, msg []byte, addr common.Address) {
	t.Helper()
	s := append([]byte(nil), sig...)
	s[crypto.RecoveryIDOffset] -= 27
	pub, err := crypto.SigToPub(accounts.TextHash(msg), s)
	if err != nil || crypto.PubkeyToAddress(*pub) != addr {
		t.Fatalf("signature is not %s's: %v", addr, err)
	}
}

// TestStoreReplicaFindsALaterKey: a second process on the same store signs for an account the
// first created (or imported) after it started, as soon as it is asked; many concurrent asks
// decrypt it once and all succeed.
func TestStoreReplicaFindsALaterKey(t *testing.T) {
	ctx := context.Background()
	cfg := storeConfig(t)
	path := filepath.Join(t.TempDir(), "web3gate.db")
	db1, db2 := openDB(t, path), openDB(t, path)
	k1 := openStoreKeys(t, cfg, db1, testPass, zaptest.NewLogger(t))
	k2 := openStoreKeys(t, cfg, db2, testPass, zaptest.NewLogger(t))
	a1, a2 := NewAccounts(k1, db1), NewAccounts(k2, db2)

	if n := len(k2.Addresses()); n != 0 {
		t.Fatalf("replica starts with %d keys, want 0", n)
	}
	created, err := a1.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	raw := mustKey(t)
	imported, err := a1.ImportKey(ctx, "alice", raw)
	if err != nil {
		t.Fatal(err)
	}

	if err := a2.Holds(ctx, "alice", created); err != nil {
		t.Fatalf("replica: alice does not hold the account created elsewhere: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sig, err := signersOf(k2).SignText(context.Background(), imported, []byte("concurrent"))
			if err == nil {
				_, err = crypto.SigToPub(accounts.TextHash([]byte("concurrent")), append(sig[:64:64], sig[64]-27))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("replica: concurrent SignText of a key imported elsewhere: %v", err)
		}
	}
	sig, err := signersOf(k2).SignText(context.Background(), imported, []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	checkSigner(t, sig, []byte("hi"), imported)
	if got := k2.Addresses(); len(got) != 2 {
		t.Fatalf("replica holds %v after the lookups, want both keys", got)
	}

	// The key is one account: the replica cannot import it again, nor create it twice.
	if _, err := a2.ImportKey(ctx, "alice", raw); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("replica: import of a key held: %v, want ErrKeyExists", err)
	}
	// A key the replica has not unlocked yet and imports: the store refuses the second row,
	// and the account stays its owner's.
	late := mustKey(t)
	lateAddr, err := a1.ImportKey(ctx, "bob", late)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.ImportKey(ctx, "alice", late); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("replica: import by alice of bob's key stored elsewhere: %v, want ErrHeldByOther", err)
	}
	if got, err := a2.ImportKey(ctx, "bob", late); !errors.Is(err, ErrKeyExists) || got != lateAddr {
		t.Fatalf("replica: import by bob of his key stored elsewhere = %s, %v; want its address and ErrKeyExists", got.Hex(), err)
	}

	unknown := crypto.PubkeyToAddress(mustKey(t).PublicKey)
	if _, err := signersOf(k2).SignText(context.Background(), unknown, []byte("x")); !errors.Is(err, ErrUnknownAccount) {
		t.Fatalf("replica: SignText for an address in no backend: %v, want ErrUnknownAccount", err)
	}
	if k2.Has(unknown) {
		t.Fatal("replica: Has is true for an address in no backend")
	}
}

// TestStoreWrongPassphrase: a store whose keys another passphrase encrypted is refused at
// start, naming the account and where the passphrase came from, never a passphrase; a key
// added later by a process with another passphrase is refused when asked for, every time.
func TestStoreWrongPassphrase(t *testing.T) {
	const wrong = "another service passphrase"
	cfg := storeConfig(t)
	path := filepath.Join(t.TempDir(), "web3gate.db")
	db1, db2 := openDB(t, path), openDB(t, path)

	// A replica started with the wrong passphrase on an empty store, then a key added by one
	// with the right passphrase.
	k2 := openStoreKeys(t, cfg, db2, wrong, zaptest.NewLogger(t))
	k1 := openStoreKeys(t, cfg, db1, testPass, zaptest.NewLogger(t))
	addr, err := k1.New()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := k2.SignHash(addr, make([]byte, 32))
		if !errors.Is(err, ErrKeystorePassphrase) || !errors.Is(err, keystore.ErrDecrypt) {
			t.Fatalf("lookup %d with the wrong passphrase: %v, want ErrKeystorePassphrase", i, err)
		}
		checkNoPassphrase(t, err, wrong)
	}
	if k2.Has(addr) {
		t.Fatal("Has is true for a key the passphrase does not decrypt")
	}

	// A start with the wrong passphrase on a store holding keys.
	t.Setenv(testEnv, wrong)
	_, err = OpenKeys(cfg, Deps{Store: db2})
	if !errors.Is(err, ErrKeystorePassphrase) || !errors.Is(err, keystore.ErrDecrypt) {
		t.Fatalf("OpenKeys with a wrong passphrase: %v, want ErrKeystorePassphrase", err)
	}
	for _, want := range []string{addr.Hex(), "in the store", "env " + testEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	checkNoPassphrase(t, err, wrong)
}

func checkNoPassphrase(t *testing.T, err error, wrong string) {
	t.Helper()
	if msg := err.Error(); strings.Contains(msg, wrong) || strings.Contains(msg, testPass) {
		t.Fatalf("error %q contains a passphrase", msg)
	}
}

func TestStoreBackendNeedsAStore(t *testing.T) {
	t.Setenv(testEnv, testPass)
	cfg := storeConfig(t)
	if _, err := OpenKeys(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), "wallet.keys.backend is store") {
		t.Fatalf("OpenKeys with backend store and no store: %v", err)
	}
	if _, err := HasKeyFiles(cfg, Deps{}); err == nil {
		t.Fatal("HasKeyFiles with backend store and no store succeeded")
	}
}

// TestDirBackendDoesNotFindLaterFiles: the directory's keys are those at start-up and those
// the process adds; a file another process writes later is not read (it is at the next start).
func TestDirBackendDoesNotFindLaterFiles(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir, testPass)
	addr, _ := storeTinyKey(t, dir, testPass)
	if k.Has(addr) {
		t.Fatal("a key file written after start-up was found")
	}
	if got := openTest(t, dir, testPass); !got.Has(addr) {
		t.Fatal("a restart does not unlock the key file")
	}
}
