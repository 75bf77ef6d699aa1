package wallet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// maxPassphraseFile bounds how much of a passphrase file is read.
const maxPassphraseFile = 64 << 10

// passphrase holds the keystore passphrase. Keys holds it behind a pointer, so that printing
// a Keys with fmt shows an address; printed itself, it shows "[redacted]".
type passphrase struct{ v string }

// Format implements fmt.Formatter: every verb prints "[redacted]".
func (passphrase) Format(f fmt.State, _ rune) { io.WriteString(f, "[redacted]") }

// resolvePassphrase returns the keystore passphrase and a description of where it came from
// (for logs; never the value): the environment variable cfg.PassphraseEnv when it is set and
// not empty, else the first line of cfg.PassphraseFile.
func resolvePassphrase(cfg KeysConfig) (*passphrase, string, error) {
	v, set := os.LookupEnv(cfg.PassphraseEnv)
	switch {
	case v != "":
		return &passphrase{v}, "env " + cfg.PassphraseEnv, nil
	case cfg.PassphraseFile != "":
		v, err := readPassphraseFile(cfg.PassphraseFile)
		if err != nil {
			return nil, "", err
		}
		return &passphrase{v}, "file " + cfg.PassphraseFile, nil
	case set:
		return nil, "", fmt.Errorf("keystore passphrase: environment variable %s is empty and "+
			"wallet.keys.passphraseFile is not set; an empty passphrase is refused", cfg.PassphraseEnv)
	default:
		return nil, "", fmt.Errorf("keystore passphrase: %w: set the environment variable %s or "+
			"configure wallet.keys.passphraseFile", ErrNoPassphrase, cfg.PassphraseEnv)
	}
}

// readPassphraseFile returns the first line of the file at path, without its line ending
// ("\n" or "\r\n", as geth's --password files). The file must be a regular file that group
// and others cannot access.
func readPassphraseFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("keystore passphrase file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("keystore passphrase file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("keystore passphrase file %s: not a regular file", path)
	}
	// Windows has no POSIX modes; elsewhere a file others can read is a leaked passphrase,
	// and one they can write lets them choose the passphrase of every new key.
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return "", fmt.Errorf("keystore passphrase file %s: mode %04o gives group or others access; "+
			"restrict it to the owner (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPassphraseFile))
	if err != nil {
		return "", fmt.Errorf("keystore passphrase file %s: %w", path, err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) == 0 {
		return "", errors.New("keystore passphrase file " + path + ": the first line is empty; " +
			"an empty passphrase is refused")
	}
	return string(line), nil
}
