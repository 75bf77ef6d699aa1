package wallet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
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
// and others cannot access (readSecretFile).
func readPassphraseFile(path string) (string, error) {
	b, err := readSecretFile(path, "keystore passphrase file", maxPassphraseFile)
	if err != nil {
		return "", err
	}
	line := firstLine(b)
	if len(line) == 0 {
		return "", errors.New("keystore passphrase file " + path + ": the first line is empty; " +
			"an empty passphrase is refused")
	}
	return string(line), nil
}

// ReadImportPassphrase returns the first line of the file at path, without its line ending:
// the passphrase of a key file being imported, which may be empty (ethers and cast accept an
// empty one). The file obeys the rule of the keystore passphrase file (readSecretFile).
func ReadImportPassphrase(path string) (string, error) {
	b, err := readSecretFile(path, "passphrase file", maxPassphraseFile)
	if err != nil {
		return "", err
	}
	return string(firstLine(b)), nil
}

// firstLine returns b up to its first "\n", without a "\r" before it.
func firstLine(b []byte) []byte {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}

// readSecretFile returns the first limit bytes of the file at path, which holds a secret (a
// passphrase, a private key); what names it in errors. It may be a regular file, or a pipe
// or character device (`--passphrase-file <(pass show key)` is /dev/fd/63, a pipe), of
// which it reads up to the first line's end. A regular file or a named pipe must not be
// open to group and others: one others can read is a leaked secret, and a passphrase file
// they can write lets them choose the passphrase of every new key; the modes of anonymous
// pipes (0600) and devices say nothing of that. (Windows has no POSIX modes; there the check
// is skipped.)
func readSecretFile(path, what string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	mode := st.Mode()
	switch {
	case mode.IsDir():
		return nil, fmt.Errorf("%s %s: is a directory; give the file that holds the secret", what, path)
	case !mode.IsRegular() && mode&(os.ModeNamedPipe|os.ModeCharDevice) == 0:
		return nil, fmt.Errorf("%s %s: not a regular file, a pipe or a character device", what, path)
	}
	if perm := mode.Perm(); runtime.GOOS != "windows" && mode&os.ModeCharDevice == 0 && perm&0o077 != 0 {
		return nil, fmt.Errorf("%s %s: mode %04o gives group or others access; "+
			"restrict it to the owner (chmod 600 %s)", what, path, perm, path)
	}
	r := io.LimitReader(f, limit)
	if !mode.IsRegular() {
		// A pipe or a terminal may stay open after the line: read the line only.
		b, err := bufio.NewReaderSize(r, 4096).ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s %s: %w", what, path, err)
		}
		return b, nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return b, nil
}

// PassphraseHint completes the message of a passphrase that did not decrypt a key, from what
// the passphrase looks like (never its value): empty, or with whitespace around it, as a
// line copied with its end or an environment variable set from such a file.
func PassphraseHint(pass string) string {
	switch {
	case pass == "":
		return "; the passphrase given is empty"
	case strings.TrimSpace(pass) != pass:
		return "; the passphrase given begins or ends with whitespace (a space, tab or carriage return): " +
			"if that is not part of it, remove it"
	}
	return ""
}
