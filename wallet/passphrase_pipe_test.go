//go:build unix

package wallet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// pipePath is a pipe holding content, by the path a shell's <(...) gives (/dev/fd/N). The
// writing end stays open until the test ends, as a process that writes a line and lingers:
// the reader takes the first line and does not wait for the end.
func pipePath(t *testing.T, content string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if _, err := w.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("/dev/fd/%d", r.Fd())
}

// fifoPath is a named pipe with mode perm, written content by another goroutine.
func fifoPath(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(content)
	}()
	t.Cleanup(func() {
		// Unblock the writer if the reader never opened the FIFO.
		if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-done
	})
	return path
}

// TestPassphraseFromPipe: a passphrase file may be a pipe (`--passphrase-file <(pass show
// key)`, /dev/fd/N) or a named pipe the owner alone can open; its first line is the
// passphrase, line end removed.
func TestPassphraseFromPipe(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"process substitution", func(t *testing.T) string { return pipePath(t, testPass+"\n") }},
		{"process substitution, CRLF", func(t *testing.T) string { return pipePath(t, testPass+"\r\nmore\n") }},
		{"named pipe", func(t *testing.T) string { return fifoPath(t, testPass+"\n", 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := KeysConfig{Dir: keystoreUnder(t, testPass), PassphraseEnv: unsetEnv, LightScrypt: true, PassphraseFile: tc.path(t)}
			k, err := OpenKeys(cfg, Deps{})
			if err != nil {
				t.Fatalf("OpenKeys: %v", err)
			}
			if n := len(k.Addresses()); n != 1 {
				t.Fatalf("%d keys unlocked, want 1", n)
			}
		})
	}
	t.Run("import passphrase", func(t *testing.T) {
		pass, err := ReadImportPassphrase(pipePath(t, "file pass: # \"x\"\n"))
		if err != nil || pass != `file pass: # "x"` {
			t.Fatalf("ReadImportPassphrase = %q, %v", pass, err)
		}
	})
	t.Run("named pipe others can open", func(t *testing.T) {
		path := fifoPath(t, testPass+"\n", 0o622)
		_, err := ReadImportPassphrase(path)
		if err == nil || !strings.Contains(err.Error(), "mode 0622 gives group or others access; restrict it to the owner (chmod 600") {
			t.Fatalf("ReadImportPassphrase = %v", err)
		}
	})
	t.Run("a socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, err = ReadImportPassphrase(path)
		if err == nil || !strings.Contains(err.Error(), "passphrase file") {
			t.Fatalf("ReadImportPassphrase of a socket = %v", err)
		}
	})
}

// TestWrongPassphraseHints: a passphrase that does not decrypt is told with what to check,
// from what it looks like: whitespace around it, or empty. The value is never quoted.
func TestWrongPassphraseHints(t *testing.T) {
	for _, tc := range []struct {
		name, pass, want string
	}{
		{"trailing space", testPass + " ", "begins or ends with whitespace (a space, tab or carriage return): if that is not part of it, remove it"},
		{"carriage return", testPass + "\r", "begins or ends with whitespace"},
		{"plain wrong", "nope-x7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(testEnv, tc.pass)
			cfg := KeysConfig{Dir: keystoreUnder(t, testPass), PassphraseEnv: testEnv, LightScrypt: true}
			_, err := OpenKeys(cfg, Deps{})
			if !errors.Is(err, ErrKeystorePassphrase) {
				t.Fatalf("OpenKeys = %v, want ErrKeystorePassphrase", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || strings.Contains(msg, strings.TrimSpace(tc.pass)) {
				t.Fatalf("message on several lines or with the passphrase: %q", msg)
			}
			if !strings.Contains(msg, "wrong keystore passphrase (from env "+testEnv+")") {
				t.Errorf("message %q does not name the source", msg)
			}
			if tc.want == "" && strings.Contains(msg, "whitespace") || !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want the hint %q", msg, tc.want)
			}
		})
	}
	if got := PassphraseHint(""); got != "; the passphrase given is empty" {
		t.Errorf("PassphraseHint(\"\") = %q", got)
	}
}
