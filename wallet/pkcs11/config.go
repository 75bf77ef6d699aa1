package pkcs11

import (
	"errors"
	"fmt"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/wallet"
)

// DefaultPINEnv is the environment variable read for the token's user PIN when pinEnv is not
// set.
const DefaultPINEnv = "WEB3GATE_PKCS11_PIN"

// Defaults of Config.
const (
	DefaultSessions    = 8
	DefaultSignTimeout = 5 * time.Second
	DefaultLabelPrefix = "web3gate"
	maxSessions        = 1024
)

// Config is the configuration of the PKCS#11 key backend. The PIN itself is never part of it:
// it comes from an environment variable or a file.
type Config struct {
	// Module is the path of the token's PKCS#11 library, as its vendor ships it (SoftHSM2 on
	// Debian: /usr/lib/softhsm/libsofthsm2.so). Empty: the PKCS#11 backend is off. The
	// library is loaded and initialised once per process and stays loaded.
	Module string `yaml:"module"`
	// TokenLabel is the label of the token holding the keys (as `softhsm2-util --show-slots`
	// or `pkcs11-tool --list-slots` print it). Give it or slot, not both; the label is the
	// better choice, as some modules (SoftHSM2 among them) renumber their slots.
	TokenLabel string `yaml:"tokenLabel"`
	// Slot is the ID of the slot holding the token, instead of tokenLabel.
	Slot *uint `yaml:"slot"`
	// PINEnv names the environment variable holding the token's user PIN. Default
	// WEB3GATE_PKCS11_PIN.
	PINEnv string `yaml:"pinEnv"`
	// PINFile is read when the environment variable is unset or empty: its first line
	// (without the line ending) is the user PIN. The file must not be accessible to group or
	// others (mode 0600 or 0400).
	PINFile string `yaml:"pinFile"`
	// Sessions is the size of the session pool: how many signatures the token computes at
	// once for this process. A signature waits for a free session (within signTimeout).
	// Sessions are opened as needed, up to this number. Default 8.
	Sessions int `yaml:"sessions"`
	// SignTimeout bounds one signature, the wait for a free session included: a token that
	// does not answer in time fails the request (signer unavailable); the session stays out of
	// the pool until the token answers. Default 5s.
	SignTimeout time.Duration `yaml:"signTimeout"`
	// LabelPrefix begins the CKA_LABEL of the keys web3gate makes or imports ("<prefix>
	// <label>", or "<prefix> <address>" without a label), so that the token's operators can
	// tell them apart. Default "web3gate".
	LabelPrefix string `yaml:"labelPrefix"`
}

// Enabled reports whether the backend is configured (module is set).
func (c *Config) Enabled() bool { return c.Module != "" }

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.PINEnv, DefaultPINEnv)
	defaults.Set(&c.Sessions, DefaultSessions)
	defaults.Set(&c.SignTimeout, DefaultSignTimeout)
	defaults.Set(&c.LabelPrefix, DefaultLabelPrefix)
}

// Validate checks c; each message names its key within the section. Nothing is checked when
// module is empty (the backend is off). A message never repeats the value of pinEnv: a PIN
// pasted there by mistake must not reach the logs.
func (c *Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	switch {
	case c.TokenLabel == "" && c.Slot == nil:
		errs = append(errs, errors.New("tokenLabel: must be set (or slot) when module is set"))
	case c.TokenLabel != "" && c.Slot != nil:
		errs = append(errs, errors.New("tokenLabel, slot: give one of them, not both"))
	}
	if len(c.TokenLabel) > 32 {
		errs = append(errs, fmt.Errorf("tokenLabel: at most 32 bytes (a PKCS#11 token label), got %d", len(c.TokenLabel)))
	}
	if !wallet.IsEnvName(c.PINEnv) {
		errs = append(errs, errors.New("pinEnv: must be the name of an environment variable "+
			"(letters, digits and _, not starting with a digit), not the PIN itself"))
	}
	if c.Sessions < 1 || c.Sessions > maxSessions {
		errs = append(errs, fmt.Errorf("sessions: must be between 1 and %d, got %d", maxSessions, c.Sessions))
	}
	if c.SignTimeout <= 0 {
		errs = append(errs, fmt.Errorf("signTimeout: must be positive, got %s", c.SignTimeout))
	}
	return errors.Join(errs...)
}

// tokenName names the configured token in messages: its label, or its slot.
func (c *Config) tokenName() string {
	if c.TokenLabel != "" {
		return fmt.Sprintf("PKCS#11 token %q", c.TokenLabel)
	}
	if c.Slot != nil {
		return fmt.Sprintf("PKCS#11 token in slot %d", *c.Slot)
	}
	return "PKCS#11 token"
}
