package wallet

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

const (
	// testEnv is the passphrase variable of the tests, so that a developer's own
	// WEB3GATE_KEYSTORE_PASSPHRASE plays no part.
	testEnv  = "WEB3GATE_WALLET_TEST_PASSPHRASE"
	testPass = "service passphrase 5f0c wallet test"
	// unsetEnv is never set, for tests of the passphrase file.
	unsetEnv = "WEB3GATE_WALLET_TEST_UNSET_PASSPHRASE"
	// tinyScryptN and tinyScryptP make scrypt nearly free. Even the light parameters cost
	// ~0.3 s per encryption or decryption under -race; most tests use these instead.
	tinyScryptN = 2
	tinyScryptP = 1
)

// testConfig is the configuration of a light-scrypt keystore in dir whose passphrase is in
// testEnv.
func testConfig(dir string) KeysConfig {
	return KeysConfig{Dir: dir, PassphraseEnv: testEnv, LightScrypt: true}
}

// openTest opens the keystore in dir with the passphrase pass in testEnv. Keys it creates
// are encrypted with tiny scrypt parameters.
func openTest(t testing.TB, dir, pass string) *Keys {
	t.Helper()
	t.Setenv(testEnv, pass)
	k, err := OpenKeys(testConfig(dir), Deps{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("OpenKeys: %v", err)
	}
	k.scryptN, k.scryptP = tinyScryptN, tinyScryptP
	return k
}

// keyFiles returns the names of the files in dir.
func keyFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// storeTinyKey writes a new random key encrypted with pass (tiny scrypt parameters) into dir
// under geth's file name convention, and returns its address and file content.
func storeTinyKey(t *testing.T, dir, pass string) (common.Address, []byte) {
	t.Helper()
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key := &keystore.Key{Address: crypto.PubkeyToAddress(priv.PublicKey), PrivateKey: priv}
	b, err := keystore.EncryptKey(key, pass, tinyScryptN, tinyScryptP)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFileName(key.Address, time.Now())), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return key.Address, b
}

// storeLightKey writes a new random key encrypted with pass into dir with geth's own
// keystore.StoreKey, and returns its address and file content.
func storeLightKey(t *testing.T, dir, pass string) (common.Address, []byte) {
	t.Helper()
	acc, err := keystore.StoreKey(dir, pass, keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(acc.URL.Path)
	if err != nil {
		t.Fatal(err)
	}
	return acc.Address, b
}

func TestNewThenReopenUnlocksTheSameKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keystore") // created by OpenKeys
	t.Setenv(testEnv, testPass)
	k, err := OpenKeys(testConfig(dir), Deps{Logger: zaptest.NewLogger(t)}) // light scrypt
	if err != nil {
		t.Fatalf("OpenKeys: %v", err)
	}
	addr, err := k.New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !k.Has(addr) {
		t.Fatalf("Has(%s) = false right after New", addr)
	}

	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o700 {
		t.Errorf("keystore dir mode = %04o, want 0700", perm)
	}
	files := keyFiles(t, dir)
	if len(files) != 1 || !strings.HasPrefix(files[0], "UTC--") ||
		!strings.HasSuffix(files[0], "--"+strings.ToLower(addr.Hex()[2:])) {
		t.Fatalf("keystore files = %q, want one UTC--<time>--<address> file", files)
	}
	st, err = os.Stat(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode = %04o, want 0600", perm)
	}

	// The file is an ordinary geth V3 key file under the service passphrase.
	b, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	key, err := keystore.DecryptKey(b, testPass)
	if err != nil {
		t.Fatalf("keystore.DecryptKey(new file): %v", err)
	}
	if key.Address != addr {
		t.Fatalf("file holds %s, want %s", key.Address, addr)
	}
	var v3 struct {
		Crypto struct {
			KDFParams struct{ N, P int } `json:"kdfparams"`
		} `json:"crypto"`
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v3); err != nil {
		t.Fatal(err)
	}
	if p := v3.Crypto.KDFParams; p.N != keystore.LightScryptN || p.P != keystore.LightScryptP || v3.Version != 3 {
		t.Fatalf("key file: version %d, scrypt n=%d p=%d; want V3 with lightScrypt's n=%d p=%d",
			v3.Version, p.N, p.P, keystore.LightScryptN, keystore.LightScryptP)
	}

	k2 := openTest(t, dir, testPass)
	if got := k2.Addresses(); !slices.Equal(got, []common.Address{addr}) {
		t.Fatalf("Addresses() after reopen = %v, want [%s]", got, addr)
	}
	sig, err := k2.SignHash(addr, crypto.Keccak256([]byte("after reopen")))
	if err != nil {
		t.Fatalf("SignHash after reopen: %v", err)
	}
	pub, err := crypto.SigToPub(crypto.Keccak256([]byte("after reopen")), sig)
	if err != nil {
		t.Fatal(err)
	}
	if got := crypto.PubkeyToAddress(*pub); got != addr {
		t.Fatalf("signature after reopen recovers to %s, want %s", got, addr)
	}
}

func TestAddressesSorted(t *testing.T) {
	k := openTest(t, t.TempDir(), testPass)
	for range 3 {
		if _, err := k.New(); err != nil {
			t.Fatal(err)
		}
	}
	got := k.Addresses()
	if len(got) != 3 || !slices.IsSortedFunc(got, func(a, b common.Address) int { return a.Cmp(b) }) {
		t.Fatalf("Addresses() = %v, want 3 sorted addresses", got)
	}
}

func TestImport(t *testing.T) {
	src := t.TempDir()
	const filePass = "the export's own passphrase"
	want, keyJSON := storeLightKey(t, src, filePass)

	dir := t.TempDir()
	k := openTest(t, dir, testPass)

	_, err := k.Import(keyJSON, "not the export's passphrase")
	if !errors.Is(err, keystore.ErrDecrypt) {
		t.Fatalf("Import with a wrong file passphrase: err = %v, want keystore.ErrDecrypt", err)
	}
	if k.Has(want) || len(keyFiles(t, dir)) != 0 {
		t.Fatal("a failed Import left the key held or a file written")
	}

	got, err := k.Import(keyJSON, filePass)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got != want || !k.Has(want) {
		t.Fatalf("Import = %s (held %v), want %s held", got, k.Has(got), want)
	}

	// Re-encrypted: the stored file opens with the service passphrase, not the export's.
	files := keyFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("keystore files = %q, want one", files)
	}
	b, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.DecryptKey(b, filePass); !errors.Is(err, keystore.ErrDecrypt) {
		t.Fatalf("stored file under the export's passphrase: err = %v, want keystore.ErrDecrypt", err)
	}
	if key, err := keystore.DecryptKey(b, testPass); err != nil || key.Address != want {
		t.Fatalf("stored file under the service passphrase: %v", err)
	}

	if _, err := k.Import(keyJSON, filePass); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second Import: err = %v, want ErrKeyExists", err)
	}
	if n := len(keyFiles(t, dir)); n != 1 {
		t.Fatalf("a duplicate Import wrote a file: %d files", n)
	}

	if !openTest(t, dir, testPass).Has(want) {
		t.Fatal("imported key not held after reopen")
	}
}

func TestImportRejectsBadFiles(t *testing.T) {
	_, keyJSON := storeTinyKey(t, t.TempDir(), "p")
	otherAddr, _ := storeTinyKey(t, t.TempDir(), "p")
	good := string(keyJSON)
	edit := func(old, new string) []byte {
		if !strings.Contains(good, old) {
			t.Fatalf("key file has no %q: %s", old, good)
		}
		return []byte(strings.Replace(good, old, new, 1))
	}
	pbkdf2 := strings.NewReplacer(`"kdf":"scrypt"`, `"kdf":"pbkdf2"`, `"n":2,`, `"c":1073741824,"prf":"hmac-sha256",`)
	// The cases marked "panics" make keystore.DecryptKey panic when given directly.
	tests := []struct {
		name    string
		keyJSON []byte
		want    string
	}{
		{"not JSON", []byte("UTC--not a key"), "not a JSON key file"},
		{"empty", nil, "not a JSON key file"},
		{"version 1", edit(`"version":3`, `"version":"1"`), "not a version 3 key file"},
		{"version 4", edit(`"version":3`, `"version":4`), "not a version 3 key file"},
		{"no version", edit(`"version":3`, `"v":3`), "not a version 3 key file"},
		{"another cipher", edit(`"aes-128-ctr"`, `"aes-256-ctr"`), "cipher: want aes-128-ctr"},
		{"short IV (panics)", edit(`"iv":"`, `"iv":"0000","was":"`), "cipherparams.iv: want 16 bytes"},
		{"no salt (panics)", edit(`"salt"`, `"nosalt"`), "kdfparams.salt: want a hex string"},
		{"no dklen (panics)", edit(`"dklen":32`, `"dk":32`), "kdfparams.dklen"},
		{"dklen 16", edit(`"dklen":32`, `"dklen":16`), "kdfparams.dklen"},
		{"dklen a string (panics)", edit(`"dklen":32`, `"dklen":"32"`), "kdfparams.dklen"},
		{"scrypt n not a power of 2", edit(`"n":2,`, `"n":3,`), "scrypt wants n a power of 2"},
		{"scrypt n fractional", edit(`"n":2,`, `"n":2.5,`), "scrypt wants n a power of 2"},
		{"scrypt without r", edit(`"r":8,`, ``), "scrypt wants n a power of 2"},
		{"scrypt asking for 1 TiB", edit(`"n":2,`, `"n":1073741824,`), "more memory or work than allowed"},
		{"scrypt asking for 256x the work", []byte(strings.NewReplacer(`"n":2,`, `"n":1048576,`, `"p":1,`, `"p":64,`).Replace(good)), "more memory or work than allowed"},
		{"pbkdf2 with 2^30 rounds", []byte(pbkdf2.Replace(good)), "kdfparams.c: want an integer from 1 to 16777216"},
		{"unknown kdf", edit(`"kdf":"scrypt"`, `"kdf":"argon2"`), "kdf: want scrypt or pbkdf2"},
		{"address field of another key", edit(`"address":"`, `"address":"`+strings.ToLower(otherAddr.Hex()[2:])+`","was":"`), "address field does not match"},
		{"address field not an address", edit(`"address":"`, `"address":"00`), "address: want 20 bytes of hex"},
		{"wrong MAC", edit(`"mac":"`, `"mac":"00`), "could not decrypt key with given password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			k := openTest(t, dir, testPass)
			_, err := k.Import(tt.keyJSON, "p")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Import: err = %v, want one containing %q", err, tt.want)
			}
			if len(k.Addresses()) != 0 || len(keyFiles(t, dir)) != 0 {
				t.Fatal("a rejected Import left a key held or a file written")
			}
		})
	}
}

func TestConcurrentImportOfOneKeySucceedsOnce(t *testing.T) {
	_, keyJSON := storeTinyKey(t, t.TempDir(), "p")
	dir := t.TempDir()
	k := openTest(t, dir, testPass)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = k.Import(keyJSON, "p") })
	}
	wg.Wait()
	var ok, exists int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrKeyExists):
			exists++
		default:
			t.Errorf("Import: %v", err)
		}
	}
	if ok != 1 || exists != n-1 {
		t.Fatalf("%d succeeded and %d got ErrKeyExists, want 1 and %d", ok, exists, n-1)
	}
	if files := keyFiles(t, dir); len(files) != 1 {
		t.Fatalf("keystore files = %q, want one", files)
	}
}

func TestReopenWithWrongPassphraseNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir, testPass)
	if _, err := k.New(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, keyFiles(t, dir)[0])

	const wrong = "a wrong service passphrase"
	t.Setenv(testEnv, wrong)
	_, err := OpenKeys(testConfig(dir), Deps{})
	if !errors.Is(err, keystore.ErrDecrypt) {
		t.Fatalf("OpenKeys with a wrong passphrase: err = %v, want keystore.ErrDecrypt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, file) {
		t.Fatalf("error %q does not name the file %s", msg, file)
	}
	if msg := err.Error(); strings.Contains(msg, wrong) || strings.Contains(msg, testPass) {
		t.Fatalf("error %q contains a passphrase", msg)
	}
}

func TestOpenSkipsNonKeyEntries(t *testing.T) {
	dir := t.TempDir()
	addr, _ := storeTinyKey(t, dir, testPass)
	for _, name := range []string{"README", "README.md", ".UTC--x.tmp123", "backup~"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := openTest(t, dir, testPass).Addresses(); !slices.Equal(got, []common.Address{addr}) {
		t.Fatalf("Addresses() = %v, want [%s]", got, addr)
	}
}

func TestOpenRejectsAStrayFile(t *testing.T) {
	dir := t.TempDir()
	storeTinyKey(t, dir, testPass)
	stray := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(stray, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testEnv, testPass)
	_, err := OpenKeys(testConfig(dir), Deps{})
	if err == nil || !strings.Contains(err.Error(), stray) || !strings.Contains(err.Error(), "not a JSON key file") {
		t.Fatalf("OpenKeys: err = %v, want one naming %s as not a key file", err, stray)
	}
}

func TestOpenUnlocksManyKeys(t *testing.T) {
	dir := t.TempDir()
	var want []common.Address
	for range 9 {
		addr, _ := storeTinyKey(t, dir, testPass)
		want = append(want, addr)
	}
	slices.SortFunc(want, func(a, b common.Address) int { return a.Cmp(b) })
	if got := openTest(t, dir, testPass).Addresses(); !slices.Equal(got, want) {
		t.Fatalf("Addresses() = %v, want %v", got, want)
	}
}

func TestOpenRejectsInvalidConfig(t *testing.T) {
	_, err := OpenKeys(KeysConfig{Dir: t.TempDir(), PassphraseEnv: "not a name"}, Deps{})
	if err == nil || !strings.Contains(err.Error(), "keys config: passphraseEnv:") {
		t.Fatalf("OpenKeys: err = %v, want a passphraseEnv config error", err)
	}
}

func TestOpenRejectsADirThatIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keystore")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testEnv, testPass)
	if _, err := OpenKeys(testConfig(file), Deps{}); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("OpenKeys: err = %v, want one naming %s", err, file)
	}
}

func TestAddInMemoryNeverWritesAFile(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir, testPass)
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte("web3gate dev account 0")))
	if err != nil {
		t.Fatal(err)
	}
	addr := k.AddInMemory(key)
	if addr != crypto.PubkeyToAddress(key.PublicKey) || !k.Has(addr) {
		t.Fatalf("AddInMemory = %s (held %v), want the key's address held", addr, k.Has(addr))
	}
	if again := k.AddInMemory(key); again != addr || len(k.Addresses()) != 1 {
		t.Fatalf("adding the key again: %s, %d keys; want %s, 1 key", again, len(k.Addresses()), addr)
	}
	if files := keyFiles(t, dir); len(files) != 0 {
		t.Fatalf("AddInMemory wrote %q", files)
	}
	if openTest(t, dir, testPass).Has(addr) {
		t.Fatal("an in-memory key is held after reopening")
	}
	// Import of an in-memory key is a duplicate too.
	keyJSON, err := keystore.EncryptKey(&keystore.Key{Address: addr, PrivateKey: key}, "p",
		tinyScryptN, tinyScryptP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Import(keyJSON, "p"); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("Import of an in-memory key: err = %v, want ErrKeyExists", err)
	}
}

// TestStandardScryptUnlock opens a keystore holding one key encrypted with geth's standard
// scrypt parameters (N=2^18, p=1), and logs how long the unlock took: that is the start-up
// cost per key per core. Timings are reported, never asserted.
func TestStandardScryptUnlock(t *testing.T) {
	b, err := os.ReadFile("testdata/standard-scrypt.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "UTC--standard"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testEnv, "testdata passphrase")
	start := time.Now()
	k, err := OpenKeys(KeysConfig{Dir: dir, PassphraseEnv: testEnv}, Deps{Logger: zap.NewNop()})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("OpenKeys: %v", err)
	}
	want := common.HexToAddress("0x902DC5ec51D7B4b0B6707d0C7a470ed044c4F9Fe")
	if !k.Has(want) {
		t.Fatalf("Addresses() = %v, want [%s]", k.Addresses(), want)
	}
	if k.scryptN != keystore.StandardScryptN || k.scryptP != keystore.StandardScryptP {
		t.Fatalf("new keys would use scrypt n=%d p=%d, want the standard n=%d p=%d",
			k.scryptN, k.scryptP, keystore.StandardScryptN, keystore.StandardScryptP)
	}
	t.Logf("one key unlocked with standard scrypt in %v", took)
}

// BenchmarkOpenKeys measures start-up: OpenKeys of a keystore of n keys, with light and
// standard scrypt parameters. ns/key is the wall time per key; with several keys, up to
// min(GOMAXPROCS, 4) decrypt at once.
func BenchmarkOpenKeys(b *testing.B) {
	tests := []struct {
		name   string
		n      int
		scrypt [2]int
	}{
		{"light/1key", 1, [2]int{keystore.LightScryptN, keystore.LightScryptP}},
		{"light/8keys", 8, [2]int{keystore.LightScryptN, keystore.LightScryptP}},
		{"standard/1key", 1, [2]int{keystore.StandardScryptN, keystore.StandardScryptP}},
		{"standard/4keys", 4, [2]int{keystore.StandardScryptN, keystore.StandardScryptP}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			dir := b.TempDir()
			for range tt.n {
				priv, err := crypto.GenerateKey()
				if err != nil {
					b.Fatal(err)
				}
				key := &keystore.Key{Address: crypto.PubkeyToAddress(priv.PublicKey), PrivateKey: priv}
				keyJSON, err := keystore.EncryptKey(key, testPass, tt.scrypt[0], tt.scrypt[1])
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, keyFileName(key.Address, time.Now())), keyJSON, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			b.Setenv(testEnv, testPass)
			for b.Loop() {
				if _, err := OpenKeys(testConfig(dir), Deps{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tt.n), "ns/key")
		})
	}
}
