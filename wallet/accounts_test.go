package wallet

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/store"
)

func openAccounts(t *testing.T) (*Accounts, *store.DB, string) {
	t.Helper()
	dir := t.TempDir()
	keys := openTest(t, filepath.Join(dir, "keystore"), "service passphrase")
	cfg := testStoreConfig(t, filepath.Join(dir, "web3gate.db"))
	cfg.SetDefaults()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewAccounts(keys, db), db, dir
}

func TestAccountsBelongToTheirOwner(t *testing.T) {
	ctx := context.Background()
	a, _, _ := openAccounts(t)
	alice, err := a.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := a.Create(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Holds(ctx, "alice", alice); err != nil {
		t.Fatalf("alice does not hold her account: %v", err)
	}
	for _, tc := range []struct{ owner, name string }{{"alice", "bob's"}, {"bob", "alice's"}} {
		addr := bob
		if tc.owner == "bob" {
			addr = alice
		}
		if err := a.Holds(ctx, tc.owner, addr); !errors.Is(err, ErrNotHeld) {
			t.Errorf("%s holds %s account: %v", tc.owner, tc.name, err)
		}
	}
	if err := a.Holds(ctx, "alice", crypto.PubkeyToAddress(mustKey(t).PublicKey)); !errors.Is(err, ErrNotHeld) {
		t.Errorf("unknown account: %v", err)
	}
	list, err := a.List(ctx, "alice")
	if err != nil || len(list) != 1 || list[0].Address != alice {
		t.Fatalf("alice's list %v %v", list, err)
	}
	all, err := a.List(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("all accounts %v %v", all, err)
	}
}

func TestImportOwnership(t *testing.T) {
	ctx := context.Background()
	a, _, _ := openAccounts(t)
	_, keyJSON := storeTinyKey(t, t.TempDir(), "file pass")
	addr, err := a.Import(ctx, "alice", keyJSON, "file pass")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Holds(ctx, "alice", addr); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Import(ctx, "alice", keyJSON, "file pass"); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second import by the owner: %v", err)
	}
	if _, err := a.Import(ctx, "bob", keyJSON, "file pass"); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("import of alice's key by bob: %v", err)
	}
	if err := a.Holds(ctx, "bob", addr); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("bob holds alice's imported key: %v", err)
	}
}

func TestImportKeyOwnership(t *testing.T) {
	ctx := context.Background()
	a, _, _ := openAccounts(t)
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := a.ImportKey(ctx, "alice", key)
	if err != nil || addr != crypto.PubkeyToAddress(key.PublicKey) {
		t.Fatalf("ImportKey = %s, %v", addr.Hex(), err)
	}
	if err := a.Holds(ctx, "alice", addr); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ImportKey(ctx, "alice", key); !errors.Is(err, ErrKeyExists) || got != addr {
		t.Fatalf("second import by the owner: %s, %v", got.Hex(), err)
	}
	if _, err := a.ImportKey(ctx, "bob", key); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("import of alice's key by bob: %v", err)
	}
	// The same key as a key file is the same account.
	b, err := keystore.EncryptKey(&keystore.Key{Address: addr, PrivateKey: key}, "p", tinyScryptN, tinyScryptP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Import(ctx, "bob", b, "p"); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("import of alice's key by bob as a key file: %v", err)
	}
}

func TestAdoptDev(t *testing.T) {
	ctx := context.Background()
	a, _, _ := openAccounts(t)
	k := mustKey(t)
	addr := crypto.PubkeyToAddress(k.PublicKey)
	for range 2 { // idempotent across restarts
		if err := a.AdoptDev(ctx, "dev", []*ecdsa.PrivateKey{k}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Holds(ctx, "dev", addr); err != nil {
		t.Fatal(err)
	}
	if err := a.AdoptDev(ctx, "someone", []*ecdsa.PrivateKey{k}); err == nil {
		t.Fatal("a dev account recorded for dev was adopted by another principal")
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestMemoryKeys(t *testing.T) {
	k := MemoryKeys(Deps{})
	if _, err := k.New(); !errors.Is(err, ErrNoKeystore) {
		t.Fatalf("New without keystore: %v", err)
	}
	if _, err := k.Import([]byte("{}"), "x"); !errors.Is(err, ErrNoKeystore) {
		t.Fatalf("Import without keystore: %v", err)
	}
	key := mustKey(t)
	addr := k.AddInMemory(key)
	if !k.Has(addr) {
		t.Fatal("in-memory key not held")
	}
	dir := t.TempDir()
	if has, err := HasKeyFiles(KeysConfig{Dir: filepath.Join(dir, "missing")}, Deps{}); has || err != nil {
		t.Fatalf("missing dir: %v %v", has, err)
	}
	storeTinyKey(t, dir, "p")
	if has, err := HasKeyFiles(KeysConfig{Dir: dir}, Deps{}); !has || err != nil {
		t.Fatalf("dir with a key: %v %v", has, err)
	}
	t.Setenv("W3G_NO_SUCH_PASS_VAR", "")
	os.Unsetenv("W3G_NO_SUCH_PASS_VAR")
	if _, err := OpenKeys(KeysConfig{Dir: dir, PassphraseEnv: "W3G_NO_SUCH_PASS_VAR"}, Deps{}); !errors.Is(err, ErrNoPassphrase) {
		t.Fatalf("OpenKeys without passphrase: %v", err)
	}
}
