package wallet

import (
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
		_, err = k.SignTx(addr, legacyTx(), chain137)
		note(err)
		_, err = k.SignText(addr, []byte("hello"))
		note(err)
		_, err = k.SignHash(addr, make([]byte, 32))
		note(err)
		_, err = k.SignTypedData(addr, mailExample(t))
		note(err)
	}
	_, err = k.SignTx(dev, dynamicFeeTx(chain137), chain137)
	note(err)
	_, err = k.SignTx(dev, dynamicFeeTx(big.NewInt(1)), chain137)
	note(err)
	_, err = k.SignTx(dev, dynamicFeeTx(chain137), nil)
	note(err)
	_, err = k.SignHash(dev, []byte("short"))
	note(err)
	bad := mailExample(t)
	bad.Message["contents"] = 1
	_, err = k.SignTypedData(dev, bad)
	note(err)
	_, err = k.SignText(recipient, []byte("x"))
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
	for addr, key := range k.keys {
		secrets["private key of "+addr.Hex()] = hex.EncodeToString(crypto.FromECDSA(key))
		secrets["private key (decimal) of "+addr.Hex()] = key.D.String()
	}
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
		secrets[fmt.Sprintf("key file %d", i)] = string(b)
		var v struct {
			Crypto struct {
				CipherText string `json:"ciphertext"`
				MAC        string `json:"mac"`
			} `json:"crypto"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Crypto.CipherText == "" {
			t.Fatalf("key file %d: no ciphertext (%v)", i, err)
		}
		secrets[fmt.Sprintf("ciphertext of key file %d", i)] = v.Crypto.CipherText
		secrets[fmt.Sprintf("MAC of key file %d", i)] = v.Crypto.MAC
	}
	if n := len(k.keys); n != 4 {
		t.Fatalf("%d keys held, want 4 (created, imported, raw, dev)", n)
	}

	for _, e := range logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		said = append(said, line)
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
	t.Logf("%d log entries and %d errors or renderings checked against %d secrets", logs.Len(), len(said)-logs.Len(), len(secrets))
}
