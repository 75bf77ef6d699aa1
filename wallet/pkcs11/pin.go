package pkcs11

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/web3gate/web3gate/wallet"
)

// pin holds the token's user PIN. Printed with fmt, it shows "[redacted]".
type pin struct{ v string }

// Format implements fmt.Formatter: every verb prints "[redacted]".
func (pin) Format(f fmt.State, _ rune) { io.WriteString(f, "[redacted]") }

// resolvePIN returns the user PIN and a description of where it came from (for messages;
// never the value): the environment variable cfg.PINEnv when it is set and not empty, else
// the first line of cfg.PINFile, which obeys the rule of the keystore passphrase file (a
// regular file or a pipe that group and others cannot access).
func resolvePIN(cfg Config) (*pin, string, error) {
	v, set := os.LookupEnv(cfg.PINEnv)
	switch {
	case v != "":
		return &pin{v}, "environment variable " + cfg.PINEnv, nil
	case cfg.PINFile != "":
		v, err := wallet.ReadImportPassphrase(cfg.PINFile)
		if err != nil {
			return nil, "", fmt.Errorf("PKCS#11 user PIN (pinFile): %w", err)
		}
		if v == "" {
			return nil, "", errors.New("PKCS#11 user PIN (pinFile): the first line of " + cfg.PINFile +
				" is empty; an empty PIN is refused")
		}
		return &pin{v}, "file " + cfg.PINFile, nil
	case set:
		return nil, "", fmt.Errorf("PKCS#11 user PIN: environment variable %s is empty and pinFile "+
			"is not set; an empty PIN is refused", cfg.PINEnv)
	default:
		return nil, "", fmt.Errorf("PKCS#11 user PIN: set the environment variable %s or configure "+
			"pinFile", cfg.PINEnv)
	}
}
