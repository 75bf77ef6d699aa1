package wallet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writePassFile writes content to a new file with mode perm and returns its path.
func writePassFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "passphrase")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // WriteFile's mode is subject to the umask
		t.Fatal(err)
	}
	return path
}

// keystoreUnder returns a keystore directory holding one key encrypted with pass.
func keystoreUnder(t *testing.T, pass string) string {
	t.Helper()
	dir := t.TempDir()
	storeTinyKey(t, dir, pass)
	return dir
}

// The passphrase is right when the keystore's key, encrypted with testPass, unlocks.
func TestPassphraseSources(t *testing.T) {
	tests := []struct {
		name string
		env  string // value of testEnv; "" leaves it unset
		file string // content of the passphrase file; "" configures none
	}{
		{"environment variable", testPass, ""},
		{"file with a newline", "", testPass + "\n"},
		{"file without a newline", "", testPass},
		{"file with CRLF and more lines", "", testPass + "\r\nsecond line\n"},
		{"environment variable wins over the file", testPass, "a wrong passphrase\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := KeysConfig{Dir: keystoreUnder(t, testPass), PassphraseEnv: unsetEnv, LightScrypt: true}
			if tt.env != "" {
				t.Setenv(testEnv, tt.env)
				cfg.PassphraseEnv = testEnv
			}
			if tt.file != "" {
				cfg.PassphraseFile = writePassFile(t, tt.file, 0o600)
			}
			k, err := OpenKeys(cfg, Deps{})
			if err != nil {
				t.Fatalf("OpenKeys: %v", err)
			}
			if n := len(k.Addresses()); n != 1 {
				t.Fatalf("%d keys unlocked, want 1", n)
			}
		})
	}
}

func TestPassphraseFileWithSpacesIsTakenVerbatim(t *testing.T) {
	const pass = "  spaced passphrase\t "
	cfg := KeysConfig{Dir: keystoreUnder(t, pass), PassphraseEnv: unsetEnv, LightScrypt: true,
		PassphraseFile: writePassFile(t, pass+"\n", 0o400)}
	if _, err := OpenKeys(cfg, Deps{}); err != nil {
		t.Fatalf("OpenKeys: %v", err)
	}
}

func TestPassphraseFileModeRefused(t *testing.T) {
	for _, perm := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602, 0o610, 0o666} {
		t.Run(perm.String(), func(t *testing.T) {
			path := writePassFile(t, testPass+"\n", perm)
			cfg := KeysConfig{Dir: t.TempDir(), PassphraseEnv: unsetEnv, PassphraseFile: path}
			_, err := OpenKeys(cfg, Deps{})
			if err == nil {
				t.Fatal("OpenKeys = nil error, want the file's mode refused")
			}
			for _, want := range []string{path, "group or others", "chmod 600"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), testPass) {
				t.Errorf("error %q contains the passphrase", err)
			}
		})
	}
}

func TestPassphraseMissing(t *testing.T) {
	tests := []struct {
		name string
		env  *string // nil: unset
		file func(t *testing.T) string
		want []string
	}{
		{
			name: "neither set",
			want: []string{testEnv, "wallet.keys.passphraseFile"},
		},
		{
			name: "environment variable empty",
			env:  new(""),
			want: []string{testEnv, "is empty", "empty passphrase is refused"},
		},
		{
			name: "file with an empty first line",
			file: func(t *testing.T) string { return writePassFile(t, "\nsecond line\n", 0o600) },
			want: []string{"first line is empty", "empty passphrase is refused"},
		},
		{
			name: "empty file",
			file: func(t *testing.T) string { return writePassFile(t, "", 0o600) },
			want: []string{"first line is empty"},
		},
		{
			name: "file missing",
			file: func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") },
			want: []string{"keystore passphrase file", "absent", "no such file"},
		},
		{
			name: "file is a directory",
			file: func(t *testing.T) string { return t.TempDir() },
			want: []string{"is a directory; give the file that holds the secret"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "keystore")
			cfg := KeysConfig{Dir: dir, PassphraseEnv: testEnv}
			t.Setenv(testEnv, "") // restored after the test
			if tt.env != nil {
				t.Setenv(testEnv, *tt.env)
			} else if err := os.Unsetenv(testEnv); err != nil {
				t.Fatal(err)
			}
			if tt.file != nil {
				cfg.PassphraseFile = tt.file(t)
			}
			_, err := OpenKeys(cfg, Deps{})
			if err == nil {
				t.Fatal("OpenKeys = nil error, want the passphrase missing")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the keystore dir was created although the passphrase is missing (stat: %v)", err)
			}
		})
	}
}
