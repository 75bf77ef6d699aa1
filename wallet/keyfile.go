package wallet

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
)

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
		if _, ok := c.KDFParams["prf"].(string); !ok {
			return nil, errors.New("kdfparams.prf: want a string")
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
