package wallet

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// FuzzDecryptKey feeds arbitrary key files to the checked decryption that Import and
// OpenKeys use: it must return an error or a key, never panic. The KDF limits are tiny here
// so that the fuzzer cannot make each run allocate a gigabyte.
func FuzzDecryptKey(f *testing.F) {
	for _, path := range []string{"testdata/standard-scrypt.json", "testdata/tiny-scrypt.json"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":3,"crypto":{"cipher":"aes-128-ctr","cipherparams":{"iv":"00000000000000000000000000000000"},"kdf":"pbkdf2","kdfparams":{"c":1,"dklen":32,"prf":"hmac-sha256","salt":""},"mac":"","ciphertext":""},"id":"a709fd3a-a96d-4faf-b70e-44a5aef2f480"}`))
	lim := kdfLimits{scryptMem: 1 << 20, scryptWork: 1 << 12, pbkdf2Iter: 1 << 10}
	f.Fuzz(func(t *testing.T, keyJSON []byte) {
		key, err := decryptKey(keyJSON, "p", lim)
		if (key == nil) == (err == nil) {
			t.Fatalf("decryptKey = %v, %v: want exactly one of a key and an error", key != nil, err)
		}
	})
}

// FuzzParsePrivateKeyHex: a key exactly when the input is one (LooksLikePrivateKey and a valid
// scalar), else an ErrNotPrivateKey error that quotes no run of hex digits from the input.
func FuzzParsePrivateKeyHex(f *testing.F) {
	for _, s := range []string{
		anvilKey0, "0x" + anvilKey0 + "\n", anvilKey0[1:], "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
		strings.Repeat("0", 64), strings.Repeat("f", 64), `{"crypto":{}}`, "word word", "",
	} {
		f.Add([]byte(s))
	}
	hexRun := regexp.MustCompile(`[0-9a-fA-F]{12,}`)
	f.Fuzz(func(t *testing.T, in []byte) {
		key, err := ParsePrivateKeyHex(in)
		if (key == nil) == (err == nil) {
			t.Fatalf("ParsePrivateKeyHex = %v, %v: want exactly one of a key and an error", key != nil, err)
		}
		if key != nil && !LooksLikePrivateKey(string(in)) {
			t.Fatalf("a key from input LooksLikePrivateKey refuses: %q", in)
		}
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotPrivateKey) {
			t.Fatalf("err = %v, want ErrNotPrivateKey", err)
		}
		for _, run := range hexRun.FindAllString(string(in), -1) {
			if strings.Contains(err.Error(), run) {
				t.Fatalf("error %q quotes the input", err)
			}
		}
	})
}
