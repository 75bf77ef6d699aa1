package wallet

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unicode"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

var (
	// ErrFilePassphrase is returned when the passphrase given for a key file being imported
	// does not decrypt it. It wraps keystore.ErrDecrypt.
	ErrFilePassphrase = errors.New("wrong passphrase for the key file (its own passphrase, not the keystore's)")
	// ErrKeystorePassphrase is returned by OpenKeys when the keystore passphrase does not
	// decrypt a file of the keystore directory. It wraps keystore.ErrDecrypt.
	ErrKeystorePassphrase = errors.New("wrong keystore passphrase")
	// ErrNotPrivateKey is returned for a raw private key that is not 32 bytes of hex forming
	// a valid secp256k1 key. Its messages never quote the input.
	ErrNotPrivateKey = errors.New("not a hex private key")
)

// maxPrivateKeyInput bounds what is read of a raw private key's file or standard input: the
// key is 64 hex digits (66 with 0x); whitespace around it is allowed up to this size.
const maxPrivateKeyInput = 4 << 10

// kdfLimits bound the work a key file may ask of its key derivation function.
type kdfLimits struct {
	scryptMem  float64 // bytes: 128 * r * n
	scryptWork float64 // n * r * p
	pbkdf2Iter float64
}

// defaultKDFLimits allow 4x the memory and 32x the work of go-ethereum's standard scrypt
// parameters (n=2^18, r=8, p=1: 256 MiB, about a second), and 2^24 PBKDF2 rounds (64x the
// 262144 that tools writing PBKDF2 key files use).
func defaultKDFLimits() kdfLimits {
	return kdfLimits{
		scryptMem:  1 << 30,
		scryptWork: 32 * keystore.StandardScryptN * 8 * keystore.StandardScryptP,
		pbkdf2Iter: 1 << 24,
	}
}

// checkKeyFile checks the structure of a V3 key file before keystore.DecryptKey reads it, and
// returns the address it declares (nil if none). DecryptKey panics on some malformed files (a
// missing salt or dklen, a dklen below 32, an IV that is not 16 bytes) and follows whatever
// KDF parameters the file names, which could ask for terabytes of memory; a file from outside
// must get an error instead. Version 1 files (2015, pre-Frontier) are refused.
func checkKeyFile(keyJSON []byte, lim kdfLimits) (*common.Address, error) {
	var f struct {
		Address string              `json:"address"`
		Crypto  keystore.CryptoJSON `json:"crypto"`
		Version any                 `json:"version"`
	}
	if err := json.Unmarshal(keyJSON, &f); err != nil {
		return nil, errors.New("not a JSON key file")
	}
	if v, ok := f.Version.(float64); !ok || v != 3 {
		return nil, errors.New("not a version 3 key file")
	}
	c := f.Crypto
	if c.Cipher != "aes-128-ctr" {
		return nil, errors.New("cipher: want aes-128-ctr")
	}
	if iv, err := hex.DecodeString(c.CipherParams.IV); err != nil || len(iv) != 16 {
		return nil, errors.New("cipherparams.iv: want 16 bytes of hex")
	}
	if _, ok := c.KDFParams["salt"].(string); !ok {
		return nil, errors.New("kdfparams.salt: want a hex string")
	}
	if dk, ok := kdfInt(c.KDFParams, "dklen"); !ok || dk < 32 || dk > 64 {
		return nil, errors.New("kdfparams.dklen: want an integer from 32 to 64")
	}
	switch c.KDF {
	case "scrypt":
		n, okN := kdfInt(c.KDFParams, "n")
		r, okR := kdfInt(c.KDFParams, "r")
		p, okP := kdfInt(c.KDFParams, "p")
		if !okN || !okR || !okP || n < 2 || int64(n)&(int64(n)-1) != 0 {
			return nil, errors.New("kdfparams: scrypt wants n a power of 2 above 1, and r and p positive integers")
		}
		if 128*r*n > lim.scryptMem || n*r*p > lim.scryptWork {
			return nil, fmt.Errorf("kdfparams: scrypt n=%.0f r=%.0f p=%.0f asks for more memory or work than allowed", n, r, p)
		}
	case "pbkdf2":
		it, ok := kdfInt(c.KDFParams, "c")
		if !ok || it < 1 || it > lim.pbkdf2Iter {
			return nil, fmt.Errorf("kdfparams.c: want an integer from 1 to %.0f", lim.pbkdf2Iter)
		}
		if prf, _ := c.KDFParams["prf"].(string); prf != "hmac-sha256" {
			return nil, errors.New("kdfparams.prf: want hmac-sha256")
		}
	default:
		return nil, errors.New("kdf: want scrypt or pbkdf2")
	}
	if f.Address == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(strings.TrimPrefix(f.Address, "0x"))
	if err != nil || len(b) != common.AddressLength {
		return nil, errors.New("address: want 20 bytes of hex")
	}
	addr := common.Address(b)
	return &addr, nil
}

// kdfInt returns params[name] if it is a JSON number holding a positive integer that fits an
// int (what keystore reads it as).
func kdfInt(params map[string]any, name string) (float64, bool) {
	v, ok := params[name].(float64)
	return v, ok && v > 0 && v == math.Trunc(v) && v <= math.MaxInt32
}

// DecryptKeyFile decrypts keyJSON, a V3 key file as geth, cast (foundry), ethers and other
// tools write it, with its own passphrase, after checking its structure (checkKeyFile). The
// member names are matched without regard to case (ethers writes "Crypto"); the address
// member is optional (cast leaves it out) and, when present, must match the key; members of
// other tools ("x-ethers": the mnemonic, which is not kept) are ignored. A wrong passphrase
// gives ErrFilePassphrase.
func DecryptKeyFile(keyJSON []byte, passphrase string) (*ecdsa.PrivateKey, error) {
	key, err := decryptKey(keyJSON, passphrase, defaultKDFLimits())
	if errors.Is(err, keystore.ErrDecrypt) {
		return nil, fmt.Errorf("%w: %w", ErrFilePassphrase, err)
	}
	if err != nil {
		return nil, err
	}
	return key.PrivateKey, nil
}

// ReadKeyFile reads the V3 key file at path, refusing one larger than a key file can be.
func ReadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("key file %s: larger than %d bytes: not a key file", path, maxKeyFile)
	}
	return b, nil
}

// ReadPrivateKeyFile reads a raw hex private key (ParsePrivateKeyHex) from the file at path,
// which must be a regular file that group and others cannot access (the rule of the
// passphrase files): a key others could read may already be copied, and is refused rather
// than taken into custody.
func ReadPrivateKeyFile(path string) (*ecdsa.PrivateKey, error) {
	b, err := readSecretFile(path, "private key file", maxPrivateKeyInput+1)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	if len(b) > maxPrivateKeyInput {
		return nil, fmt.Errorf("private key file %s: %w: larger than %d bytes", path, ErrNotPrivateKey, maxPrivateKeyInput)
	}
	key, err := ParsePrivateKeyHex(b)
	if err != nil {
		return nil, fmt.Errorf("private key file %s: %w", path, err)
	}
	return key, nil
}

// ReadPrivateKey reads a raw hex private key (ParsePrivateKeyHex) from r, to its end.
func ReadPrivateKey(r io.Reader) (*ecdsa.PrivateKey, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPrivateKeyInput+1))
	defer clear(b)
	if err != nil {
		return nil, fmt.Errorf("read private key: %w", err)
	}
	if len(b) > maxPrivateKeyInput {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrNotPrivateKey, maxPrivateKeyInput)
	}
	return ParsePrivateKeyHex(b)
}

// ParsePrivateKeyHex parses a raw private key as wallets and tools export it: 64 hex digits,
// with or without 0x, whitespace (a line ending) around them ignored. Errors wrap
// ErrNotPrivateKey and say what the input looks like instead, never quoting it.
func ParsePrivateKeyHex(b []byte) (*ecdsa.PrivateKey, error) {
	s := bytes.TrimSpace(b)
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	raw := make([]byte, 32)
	defer clear(raw)
	if len(s) != hex.EncodedLen(len(raw)) {
		return nil, fmt.Errorf("%w: %s", ErrNotPrivateKey, describeNonKey(s))
	}
	if _, err := hex.Decode(raw, s); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotPrivateKey, describeNonKey(s))
	}
	key, err := crypto.ToECDSA(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: not a valid secp256k1 key (zero, or not below the curve order)", ErrNotPrivateKey)
	}
	return key, nil
}

// describeNonKey says what s, trimmed input that is not 64 hex digits, looks like, without
// quoting any of it.
func describeNonKey(s []byte) string {
	switch {
	case len(s) == 0:
		return "empty; want 64 hex digits"
	case s[0] == '{':
		return "it looks like a JSON key file; import that as a key file, with its passphrase"
	case bytes.ContainsFunc(s, unicode.IsSpace):
		return "it holds several words (a mnemonic phrase is not taken); want 64 hex digits"
	case !isHex(s):
		return "not hex; want 64 hex digits, with or without 0x"
	case len(s) == 2*common.AddressLength:
		return "40 hex digits: an address, not a private key"
	default:
		return fmt.Sprintf("%d hex digits, want 64", len(s))
	}
}

func isHex(s []byte) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// LooksLikePrivateKey reports whether s is a raw hex private key (64 hex digits, with or
// without 0x): for refusing one given where it would be exposed (a command line).
func LooksLikePrivateKey(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	return len(s) == 64 && isHex([]byte(s))
}
