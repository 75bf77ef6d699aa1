package wallet

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// specKey is the private key of the Web3 Secret Storage test vectors.
const specKey = "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"

func addressOfHex(t *testing.T, h string) common.Address {
	t.Helper()
	k, err := crypto.HexToECDSA(h)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

// The key files of testdata/keyfiles were written by cast, ethers and the spec (see its
// README); the geth one is written here by go-ethereum's keystore.StoreKey, what
// `geth account new` runs. Each decrypts with its passphrase to its address, and with a wrong
// one gives ErrFilePassphrase.
func TestDecryptKeyFileFromTools(t *testing.T) {
	const fixturePass = "fixture-pass"
	gethAddr, gethJSON := storeLightKey(t, t.TempDir(), "geth-pass")
	tests := []struct {
		name string
		file string // under testdata/keyfiles, or "" for gethJSON
		pass string
		want common.Address
	}{
		{"geth account new (scrypt, address without 0x)", "", "geth-pass", gethAddr},
		{"cast wallet new (no address member)", "cast-wallet-new.json", fixturePass, common.HexToAddress("0x79546C57D301F77c477959b2cfbc3A0c734B4aCc")},
		{"ethers encrypt, HD wallet (Crypto capitalised, x-ethers mnemonic)", "ethers-encrypt.json", fixturePass, common.HexToAddress("0xfF2378415d14da371Fa581362948C5ac4F6c82DF")},
		{"ethers encryptSync (Crypto capitalised)", "ethers-encrypt-sync.json", fixturePass, common.HexToAddress("0xF43068F5aCD12B12A245175B0E0F6e6e05A14bb3")},
		{"Web3 Secret Storage pbkdf2 vector", "web3-secret-storage-pbkdf2.json", "testpassword", addressOfHex(t, specKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keyJSON := gethJSON
			if tt.file != "" {
				var err error
				if keyJSON, err = ReadKeyFile(filepath.Join("testdata", "keyfiles", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			key, err := DecryptKeyFile(keyJSON, tt.pass)
			if err != nil {
				t.Fatalf("DecryptKeyFile: %v", err)
			}
			if got := crypto.PubkeyToAddress(key.PublicKey); got != tt.want {
				t.Fatalf("key of %s, want %s", got.Hex(), tt.want.Hex())
			}

			_, err = DecryptKeyFile(keyJSON, tt.pass+"x")
			if !errors.Is(err, ErrFilePassphrase) || !errors.Is(err, keystore.ErrDecrypt) || errors.Is(err, ErrKeystorePassphrase) {
				t.Fatalf("wrong passphrase: err = %v, want ErrFilePassphrase (wrapping keystore.ErrDecrypt)", err)
			}
			if !strings.Contains(err.Error(), "its own passphrase, not the keystore's") {
				t.Fatalf("wrong passphrase: %q does not say which passphrase", err)
			}

			// Imported, it is held and stored under the keystore passphrase.
			dir := t.TempDir()
			k := openTest(t, dir, testPass)
			addr, err := k.Import(keyJSON, tt.pass)
			if err != nil || addr != tt.want || !k.Has(tt.want) {
				t.Fatalf("Import = %s, %v; want %s held", addr.Hex(), err, tt.want.Hex())
			}
			if !openTest(t, dir, testPass).Has(tt.want) {
				t.Fatal("imported key not held after reopen")
			}
		})
	}
}

func TestDecryptKeyFileRefusesAnotherPRF(t *testing.T) {
	b, err := ReadKeyFile("testdata/keyfiles/web3-secret-storage-pbkdf2.json")
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"hmac-sha256"`, `"hmac-sha512"`, 1))
	if _, err := DecryptKeyFile(b, "testpassword"); err == nil || !strings.Contains(err.Error(), "kdfparams.prf: want hmac-sha256") {
		t.Fatalf("DecryptKeyFile with hmac-sha512: err = %v, want the prf named", err)
	}
}

func TestReadKeyFileRefusesALargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, make([]byte, maxKeyFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(path); err == nil || !strings.Contains(err.Error(), "not a key file") {
		t.Fatalf("ReadKeyFile of %d bytes: err = %v", maxKeyFile+1, err)
	}
}

// anvilKey0 is the first account of anvil's (public) test mnemonic.
const anvilKey0 = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

func TestParsePrivateKeyHex(t *testing.T) {
	want := addressOfHex(t, anvilKey0)
	for _, in := range []string{
		anvilKey0,
		"0x" + anvilKey0,
		"0X" + anvilKey0,
		strings.ToUpper(anvilKey0),
		anvilKey0 + "\n",
		"0x" + anvilKey0 + "\r\n",
		"  \t0x" + anvilKey0 + " \n\n",
	} {
		key, err := ParsePrivateKeyHex([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got := crypto.PubkeyToAddress(key.PublicKey); got != want {
			t.Fatalf("%q: key of %s, want %s", in, got.Hex(), want.Hex())
		}
	}
}

func TestParsePrivateKeyHexRefusals(t *testing.T) {
	curveOrder := "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"whitespace only", " \n", "empty"},
		{"0x alone", "0x", "empty"},
		{"63 digits", anvilKey0[1:], "63 hex digits, want 64"},
		{"65 digits", anvilKey0 + "0", "65 hex digits, want 64"},
		{"an address", "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "an address, not a private key"},
		{"not hex", anvilKey0[:63] + "g", "not hex"},
		{"0x twice", "0x0x" + anvilKey0[4:], "not hex"},
		{"a JSON key file", `{"version":3,"crypto":{}}`, "looks like a JSON key file"},
		{"a mnemonic", "test test test test test test test test test test test junk", "mnemonic phrase is not taken"},
		{"two keys", anvilKey0 + "\n" + anvilKey0, "several words"},
		{"zero", strings.Repeat("0", 64), "not a valid secp256k1 key"},
		{"the curve order", curveOrder, "not a valid secp256k1 key"},
		{"above the curve order", strings.Repeat("f", 64), "not a valid secp256k1 key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePrivateKeyHex([]byte(tt.in))
			if !errors.Is(err, ErrNotPrivateKey) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrNotPrivateKey saying %q", err, tt.want)
			}
			if secret := strings.TrimSpace(tt.in); len(secret) > 8 && strings.Contains(err.Error(), secret[2:10]) {
				t.Fatalf("error %q quotes the input", err)
			}
		})
	}
}

func TestLooksLikePrivateKey(t *testing.T) {
	for in, want := range map[string]bool{
		anvilKey0:                true,
		"0x" + anvilKey0:         true,
		" 0X" + anvilKey0 + "\n": true,
		anvilKey0[1:]:            false,
		"0x" + anvilKey0 + "0":   false,
		"key.json":               false,
		"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266": false,
		"./" + anvilKey0:                          false,
		strings.Repeat("g", 64):                   false,
		"3f709d1b-4c87-4b1a-887b-3333d36c5af1":    false,
		"UTC--2026-11-25T14-19-39.0Z--7bf4cab4f4": false,
	} {
		if got := LooksLikePrivateKey(in); got != want {
			t.Errorf("LooksLikePrivateKey(%q) = %v, want %v", in, got, want)
		}
	}
}

// writeSecret writes content to a new file with mode perm and returns its path.
func writeSecret(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // WriteFile's mode is subject to the umask
		t.Fatal(err)
	}
	return path
}

func TestReadPrivateKeyFile(t *testing.T) {
	want := addressOfHex(t, anvilKey0)
	for _, perm := range []os.FileMode{0o600, 0o400} {
		key, err := ReadPrivateKeyFile(writeSecret(t, "0x"+anvilKey0+"\n", perm))
		if err != nil || crypto.PubkeyToAddress(key.PublicKey) != want {
			t.Fatalf("mode %v: %v", perm, err)
		}
	}
	for _, perm := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o660} {
		t.Run("mode "+perm.String(), func(t *testing.T) {
			path := writeSecret(t, anvilKey0, perm)
			_, err := ReadPrivateKeyFile(path)
			for _, w := range []string{"private key file " + path, "group or others", "chmod 600"} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("err = %v, want one containing %q", err, w)
				}
			}
		})
	}
	tests := []struct {
		name string
		path func(t *testing.T) string
		want string
	}{
		{"a directory", func(t *testing.T) string { d := t.TempDir(); os.Chmod(d, 0o700); return d }, "is a directory; give the file that holds the secret"},
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, "no such file"},
		{"too large", func(t *testing.T) string {
			return writeSecret(t, anvilKey0+strings.Repeat(" ", maxPrivateKeyInput), 0o600)
		}, "larger than 4096 bytes"},
		{"not a key", func(t *testing.T) string { return writeSecret(t, anvilKey0[:40], 0o600) }, "an address, not a private key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadPrivateKeyFile(tt.path(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), anvilKey0[:40]) {
				t.Fatalf("err = %v, want one containing %q and no key", err, tt.want)
			}
		})
	}
}

func TestReadPrivateKey(t *testing.T) {
	key, err := ReadPrivateKey(strings.NewReader("\n" + anvilKey0 + "\n"))
	if err != nil || crypto.PubkeyToAddress(key.PublicKey) != addressOfHex(t, anvilKey0) {
		t.Fatalf("ReadPrivateKey: %v", err)
	}
	_, err = ReadPrivateKey(strings.NewReader(strings.Repeat("\n", maxPrivateKeyInput) + anvilKey0))
	if !errors.Is(err, ErrNotPrivateKey) || !strings.Contains(err.Error(), "more than 4096 bytes") {
		t.Fatalf("ReadPrivateKey of a large input: err = %v", err)
	}
}

func TestReadImportPassphrase(t *testing.T) {
	for content, want := range map[string]string{
		"pass\n":           "pass",
		"pass\r\nsecond\n": "pass",
		" spaced \n":       " spaced ",
		"\n":               "",
		"":                 "",
	} {
		got, err := ReadImportPassphrase(writeSecret(t, content, 0o600))
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", content, got, err, want)
		}
	}
	path := writeSecret(t, "pass\n", 0o644)
	if _, err := ReadImportPassphrase(path); err == nil || !strings.Contains(err.Error(), "passphrase file "+path+": mode 0644") {
		t.Fatalf("mode 0644: err = %v", err)
	}
}

func TestImportKey(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir, testPass)
	key, err := ParsePrivateKeyHex([]byte(anvilKey0))
	if err != nil {
		t.Fatal(err)
	}
	want := addressOfHex(t, anvilKey0)
	if got, err := k.ImportKey(key); err != nil || got != want || !k.Has(want) {
		t.Fatalf("ImportKey = %s, %v; want %s held", got.Hex(), err, want.Hex())
	}
	files := keyFiles(t, dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], hex.EncodeToString(want[:])) {
		t.Fatalf("keystore files = %q, want one named for %s", files, want.Hex())
	}
	b, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), anvilKey0) {
		t.Fatal("the key is stored in clear")
	}
	if got, err := keystore.DecryptKey(b, testPass); err != nil || got.Address != want {
		t.Fatalf("stored file under the keystore passphrase: %v", err)
	}
	if got, err := k.ImportKey(key); !errors.Is(err, ErrKeyExists) || got != want {
		t.Fatalf("second ImportKey = %s, %v; want ErrKeyExists with the address", got.Hex(), err)
	}
	if !openTest(t, dir, testPass).Has(want) {
		t.Fatal("imported key not held after reopen")
	}
	if _, err := MemoryKeys(Deps{}).ImportKey(key); !errors.Is(err, ErrNoKeystore) {
		t.Fatalf("ImportKey without a keystore: err = %v", err)
	}
}

// A wrong keystore passphrase and a wrong key file passphrase give different errors, each
// saying which passphrase it is and where the keystore's came from.
func TestWrongPassphrasesAreToldApart(t *testing.T) {
	dir := t.TempDir()
	if _, err := openTest(t, dir, testPass).New(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testEnv, "a wrong keystore passphrase")
	_, err := OpenKeys(testConfig(dir), Deps{})
	if !errors.Is(err, ErrKeystorePassphrase) || errors.Is(err, ErrFilePassphrase) || !errors.Is(err, keystore.ErrDecrypt) {
		t.Fatalf("OpenKeys: err = %v, want ErrKeystorePassphrase", err)
	}
	if !strings.Contains(err.Error(), "wrong keystore passphrase (from env "+testEnv+")") {
		t.Fatalf("OpenKeys: %q does not name the passphrase's source", err)
	}

	_, keyJSON := storeTinyKey(t, t.TempDir(), "file pass")
	_, err = openTest(t, t.TempDir(), testPass).Import(keyJSON, "a wrong file passphrase")
	if !errors.Is(err, ErrFilePassphrase) || errors.Is(err, ErrKeystorePassphrase) {
		t.Fatalf("Import: err = %v, want ErrFilePassphrase", err)
	}
}
