package wallet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestSecretsNeverLogged runs every operation, failures included, with a debug-level logger
// and checks that no log line (message or field), no returned error and no fmt or JSON
// rendering of Keys contains a passphrase, a private key or a key file's content.
func TestSecretsNeverLogged(t *testing.T) {
	const (
		servicePass = "service-secret-Q7x!passphrase"
		wrongPass   = "wrong-service-secret-K2m?"
		filePass    = "export-file-secret-Z9p#"
		wrongFile   = "wrong-export-secret-B4n&"
	)
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	var said []string // every error and rendering produced
	note := func(err error) {
		if err != nil {
			said = append(said, err.Error())
		}
	}

	dir := t.TempDir()
	cfg := KeysConfig{Dir: dir, PassphraseEnv: testEnv, LightScrypt: true}
	t.Setenv(testEnv, servicePass)
	k, err := OpenKeys(cfg, Deps{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	k.scryptN, k.scryptP = tinyScryptN, tinyScryptP

	// New, Import (wrong passphrase, right, duplicate, garbage), ImportKey, AddInMemory.
	created, err := k.New()
	note(err)
	_, exported := storeTinyKey(t, t.TempDir(), filePass)
	_, err = k.Import(exported, wrongFile)
	note(err)
	imported, err := k.Import(exported, filePass)
	note(err)
	_, err = k.Import(exported, filePass)
	note(err)
	_, err = k.Import(exported[:len(exported)/2], filePass)
	note(err)
	// A raw key: imported (twice), read from a file others can read, and near misses of
	// it (one digit short, one digit not hex) parsed.
	rawKey, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rawHex := hex.EncodeToString(crypto.FromECDSA(rawKey))
	_, err = k.ImportKey(rawKey)
	note(err)
	_, err = k.ImportKey(rawKey)
	note(err)
	openKeyFile := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(openKeyFile, []byte(rawHex), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openKeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadPrivateKeyFile(openKeyFile)
	note(err)
	for _, near := range []string{rawHex[:63], rawHex[:63] + "z", "0x" + rawHex + "0", rawHex + " " + rawHex} {
		_, err = ParsePrivateKeyHex([]byte(near))
		note(err)
	}
	devKey, err := crypto.ToECDSA(crypto.Keccak256([]byte("secret dev key")))
	if err != nil {
		t.Fatal(err)
	}
	dev := k.AddInMemory(devKey)

	// Signing, good and bad.
	for _, addr := range k.Addresses() {
		_, err = signersOf(k).SignTx(context.Background(), addr, legacyTx(), chain137)
		note(err)
		_, err = signersOf(k).SignText(context.Background(), addr, []byte("hello"))
		note(err)
		_, err = k.SignHash(addr, make([]byte, 32))
		note(err)
		_, err = signersOf(k).SignTypedData(context.Background(), addr, mailExample(t))
		note(err)
	}
	_, err = signersOf(k).SignTx(context.Background(), dev, dynamicFeeTx(chain137), chain137)
	note(err)
	_, err = signersOf(k).SignTx(context.Background(), dev, dynamicFeeTx(big.NewInt(1)), chain137)
	note(err)
	_, err = signersOf(k).SignTx(context.Background(), dev, dynamicFeeTx(chain137), nil)
	note(err)
	_, err = k.SignHash(dev, []byte("short"))
	note(err)
	bad := mailExample(t)
	bad.Message["contents"] = 1
	_, err = signersOf(k).SignTypedData(context.Background(), dev, bad)
	note(err)
	_, err = signersOf(k).SignText(context.Background(), recipient, []byte("x"))
	note(err)

	// Reopen: right passphrase, wrong passphrase, passphrase file with a bad mode, a file
	// that is not a key (a copy of a key with a broken MAC).
	_, err = OpenKeys(cfg, Deps{Logger: log})
	note(err)
	t.Setenv(testEnv, wrongPass)
	_, err = OpenKeys(cfg, Deps{Logger: log})
	note(err)
	if err == nil {
		t.Fatal("OpenKeys with a wrong passphrase succeeded")
	}
	passFile := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(passFile, []byte(servicePass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(passFile, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenKeys(KeysConfig{Dir: dir, PassphraseEnv: unsetEnv, PassphraseFile: passFile}, Deps{Logger: log})
	note(err)
	_, err = OpenKeys(KeysConfig{Dir: dir, PassphraseEnv: servicePass}, Deps{Logger: log})
	note(err)

	said = append(said, fmt.Sprintf("%v %+v %#v", k, k, k), fmt.Sprint(k), fmt.Sprintf("%#v", *k.pass))
	js, err := json.Marshal(k)
	note(err)
	said = append(said, string(js))
	log.Info("keys as a field", zap.Any("keys", k), zap.Reflect("reflect", k))

	// The secrets: passphrases, every private key held, every key file's content (whole, and
	// its ciphertext, which with the passphrase gives the key).
	secrets := map[string]string{
		"service passphrase": servicePass, "wrong passphrase": wrongPass,
		"file passphrase": filePass, "wrong file passphrase": wrongFile,
		"raw key, one digit short": rawHex[:63],
	}
	for _, addr := range []common.Address{created, imported, crypto.PubkeyToAddress(rawKey.PublicKey), dev} {
		if !k.Has(addr) {
			t.Fatalf("%s is not held", addr)
		}
	}
	addKeySecrets(secrets, k)
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	keyFiles := [][]byte{exported}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		keyFiles = append(keyFiles, b)
	}
	for i, b := range keyFiles {
		addKeyFileSecrets(t, secrets, fmt.Sprintf("key file %d", i), b)
	}
	if n := len(k.keys); n != 4 {
		t.Fatalf("%d keys held, want 4 (created, imported, raw, dev)", n)
	}

	checkSecrets(t, said, logs, secrets)
}

// addKeyFileSecrets adds to secrets a key file's content, whole, and its ciphertext and MAC
// (which with the passphrase give the key).
func addKeyFileSecrets(t *testing.T, secrets map[string]string, name string, b []byte) {
	t.Helper()
	secrets[name] = string(b)
	var v struct {
		Crypto struct {
			CipherText string `json:"ciphertext"`
			MAC        string `json:"mac"`
		} `json:"crypto"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Crypto.CipherText == "" {
		t.Fatalf("%s: no ciphertext (%v)", name, err)
	}
	secrets["ciphertext of "+name] = v.Crypto.CipherText
	secrets["MAC of "+name] = v.Crypto.MAC
}

// addKeySecrets adds to secrets every private key k holds, in hex and decimal.
func addKeySecrets(secrets map[string]string, k *Keys) {
	for addr, key := range k.keys {
		secrets["private key of "+addr.Hex()] = hex.EncodeToString(crypto.FromECDSA(key))
		secrets["private key (decimal) of "+addr.Hex()] = key.D.String()
	}
}

// checkSecrets checks that no log entry and nothing said contains a secret.
func checkSecrets(t *testing.T, said []string, logs *observer.ObservedLogs, secrets map[string]string) {
	t.Helper()
	for _, e := range logs.All() {
		said = append(said, e.Message+" "+fmt.Sprint(e.ContextMap()))
	}
	if logs.Len() < 5 {
		t.Fatalf("only %d log entries captured; the test does not exercise the logging", logs.Len())
	}
	for _, s := range said {
		for name, secret := range secrets {
			if strings.Contains(strings.ToLower(s), strings.ToLower(secret)) {
				t.Errorf("%s appears in %q", name, s)
			}
		}
	}
	t.Logf("%d log entries and %d errors or renderings checked against %d secrets", logs.Len(), len(said), len(secrets))
}

// TestStoreSecretsNeverLogged is TestSecretsNeverLogged for keys kept in the store: creating
// and importing keys, a replica finding them, a replica and a start with the wrong
// passphrase. No log line, error or rendering holds a passphrase, a private key or a stored
// key file.
func TestStoreSecretsNeverLogged(t *testing.T) {
	const (
		servicePass = "store-service-secret-H3j!passphrase"
		wrongPass   = "wrong-store-secret-T8v?"
		filePass    = "export-file-secret-W1c#"
		wrongFile   = "wrong-export-secret-E6y&"
	)
	ctx := context.Background()
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	var said []string
	note := func(err error) {
		if err != nil {
			said = append(said, err.Error())
		}
	}
	cfg := storeConfig(t)
	path := filepath.Join(t.TempDir(), "web3gate.db")
	db1, db2, db3 := openDB(t, path), openDB(t, path), openDB(t, path)

	k1 := openStoreKeys(t, cfg, db1, servicePass, log)
	replica := openStoreKeys(t, cfg, db2, servicePass, log)
	wrong := openStoreKeys(t, cfg, db3, wrongPass, log)
	a1 := NewAccounts(k1, db1)

	created, err := a1.Create(ctx, "alice")
	note(err)
	_, exported := storeTinyKey(t, t.TempDir(), filePass)
	_, err = a1.Import(ctx, "alice", exported, wrongFile)
	note(err)
	imported, err := a1.Import(ctx, "alice", exported, filePass)
	note(err)
	_, err = NewAccounts(replica, db2).Import(ctx, "alice", exported, filePass)
	note(err)
	rawKey := mustKey(t)
	raw, err := a1.ImportKey(ctx, "bob", rawKey)
	note(err)

	for _, addr := range []common.Address{created, imported, raw} {
		_, err = signersOf(replica).SignText(context.Background(), addr, []byte("hello"))
		note(err)
		_, err = signersOf(wrong).SignText(context.Background(), addr, []byte("hello"))
		note(err)
		if err == nil {
			t.Fatalf("a replica with the wrong passphrase signed for %s", addr)
		}
	}
	t.Setenv(testEnv, wrongPass)
	_, err = OpenKeys(cfg, Deps{Logger: log, Store: db3})
	note(err)
	if err == nil {
		t.Fatal("OpenKeys with a wrong passphrase succeeded")
	}
	said = append(said, fmt.Sprintf("%v %+v %#v", replica, replica, replica), fmt.Sprintf("%#v", *replica.pass))
	js, err := json.Marshal(replica)
	note(err)
	said = append(said, string(js))
	log.Info("keys as a field", zap.Any("keys", replica), zap.Reflect("reflect", replica))

	secrets := map[string]string{
		"service passphrase": servicePass, "wrong passphrase": wrongPass,
		"file passphrase": filePass, "wrong file passphrase": wrongFile,
	}
	if n := len(replica.keys); n != 3 {
		t.Fatalf("the replica holds %d keys, want 3", n)
	}
	addKeySecrets(secrets, k1)
	addKeySecrets(secrets, replica)
	addKeyFileSecrets(t, secrets, "exported key file", exported)
	stored, err := db1.AllKeys(ctx)
	if err != nil || len(stored) != 3 {
		t.Fatalf("%d stored keys, %v; want 3", len(stored), err)
	}
	for _, s := range stored {
		addKeyFileSecrets(t, secrets, "stored key of "+s.Address.Hex(), s.JSON)
	}
	checkSecrets(t, said, logs, secrets)
}
