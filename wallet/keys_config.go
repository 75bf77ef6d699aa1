package wallet

import (
	"errors"
	"fmt"

	"github.com/web3gate/web3gate/internal/defaults"
)

// DefaultPassphraseEnv is the environment variable read for the keystore passphrase when
// wallet.keys.passphraseEnv is not set.
const DefaultPassphraseEnv = "WEB3GATE_KEYSTORE_PASSPHRASE"

// Key backends (wallet.keys.backend).
const (
	// KeysBackendDir keeps the keys as files of the keystore directory (the default).
	KeysBackendDir = "dir"
	// KeysBackendStore keeps the keys in the store, shared by every process using it.
	KeysBackendStore = "store"
)

// KeysConfig is the `wallet.keys:` part of config.yaml. The passphrase itself is never part
// of the configuration: it comes from an environment variable or a file.
type KeysConfig struct {
	// Backend is where the encrypted keys are kept: "dir" (default), the keystore directory,
	// or "store", the store's database, so that every replica sharing it can sign for every
	// account. Both hold the same V3 key files, with the same encryption and passphrase.
	Backend string `yaml:"backend"`
	// Dir is the keystore directory (go-ethereum V3 key files), created with mode 0700 if
	// missing, with backend "dir". Default "keystore".
	Dir string `yaml:"dir"`
	// PassphraseEnv names the environment variable holding the passphrase. Default
	// WEB3GATE_KEYSTORE_PASSPHRASE.
	PassphraseEnv string `yaml:"passphraseEnv"`
	// PassphraseFile is read when the environment variable is unset or empty: its first line
	// (without the line ending) is the passphrase. The file must not be accessible to group
	// or others (mode 0600 or 0400).
	PassphraseFile string `yaml:"passphraseFile"`
	// LightScrypt encrypts new keys with keystore.LightScryptN/P instead of
	// StandardScryptN/P: fast, and weak. For tests and development only.
	LightScrypt bool `yaml:"lightScrypt"`
}

// SetDefaults fills unset fields with their defaults.
func (c *KeysConfig) SetDefaults() {
	defaults.Set(&c.Backend, KeysBackendDir)
	defaults.Set(&c.Dir, "keystore")
	defaults.Set(&c.PassphraseEnv, DefaultPassphraseEnv)
}

// Validate checks c; each message names its key within the section. A message never repeats
// the value of passphraseEnv: a passphrase pasted there by mistake must not reach the logs.
func (c *KeysConfig) Validate() error {
	var errs []error
	switch c.Backend {
	case KeysBackendDir, KeysBackendStore:
	default:
		errs = append(errs, fmt.Errorf("backend: must be %q or %q, got %q", KeysBackendDir, KeysBackendStore, c.Backend))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: must not be empty"))
	}
	if !IsEnvName(c.PassphraseEnv) {
		errs = append(errs, errors.New("passphraseEnv: must be the name of an environment variable "+
			"(letters, digits and _, not starting with a digit), not the passphrase itself"))
	}
	return errors.Join(errs...)
}

// IsEnvName reports whether s is a portable environment variable name (letters, digits and
// _, not starting with a digit): what a setting naming a secret's variable must hold.
func IsEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == '_', 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z':
		case '0' <= b && b <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
