package wallet

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"
)

// dirBackend keeps each key as a V3 key file of the keystore directory, under go-ethereum's
// file name convention. Its keys are those of the directory at start-up and those this
// process adds: a file written by another process is found at the next start.
type dirBackend struct {
	dir string
}

var _ keyBackend = (*dirBackend)(nil)

// openDirBackend opens the keystore directory dir, created with mode 0700 if missing.
func openDirBackend(dir string, log *zap.Logger) (*dirBackend, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("keystore dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("keystore dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("keystore dir %s: not a directory", dir)
	}
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		log.Warn("keystore: directory is accessible to group or others; 0700 is recommended",
			zap.String("dir", dir), zap.String("mode", fmt.Sprintf("%04o", perm)))
	}
	return &dirBackend{dir: dir}, nil
}

func (b *dirBackend) String() string { return "dir " + b.dir }

func (b *dirBackend) wrongPassphraseHint() string {
	return "or the file was encrypted with another passphrase " +
		"(a key file from elsewhere is taken in with `web3gate accounts import`, not copied into the keystore)"
}

// all reads every key file of the directory. Files whose name starts with "." (temporary
// files of an interrupted write) or ends with "~", README files and subdirectories are
// skipped; any other file must be a key file.
func (b *dirBackend) all(context.Context) ([]keyFile, error) {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, fmt.Errorf("keystore dir: %w", err)
	}
	var files []keyFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || skippedFile(name) {
			continue
		}
		path := filepath.Join(b.dir, name)
		js, err := readKeystoreFile(path)
		if err != nil {
			return nil, err
		}
		files = append(files, keyFile{where: path, json: js})
	}
	return files, nil
}

// find does not look: the directory's keys are read at start-up.
func (b *dirBackend) find(context.Context, common.Address) (keyFile, error) {
	return keyFile{}, errNoKeyFile
}

// any reports whether the directory holds a key file; a missing directory holds none.
func (b *dirBackend) any(context.Context) (bool, error) {
	entries, err := os.ReadDir(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keystore dir: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() && !skippedFile(e.Name()) {
			return true, nil
		}
	}
	return false, nil
}

// put writes keyJSON under go-ethereum's file name convention (UTC--<time>--<address>),
// atomically and durably: a temporary file (mode 0600) is written, synced, read back and
// checked with verify, then renamed into place, and the directory is synced. A key must not
// be reported created and then lost.
func (b *dirBackend) put(_ context.Context, addr common.Address, keyJSON []byte, verify func([]byte) error) (path string, err error) {
	name := keyFileName(addr, time.Now())
	path = filepath.Join(b.dir, name)
	f, err := os.CreateTemp(b.dir, "."+name+".tmp*")
	if err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	_, err = f.Write(keyJSON)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	written, err := os.ReadFile(tmp)
	if err != nil {
		return "", fmt.Errorf("verify key file: %w", err)
	}
	if err := verify(written); err != nil {
		return "", fmt.Errorf("verify key file %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	if err := syncDir(b.dir); err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	return path, nil
}

// readKeystoreFile reads a file of the keystore directory (ReadKeyFile).
func readKeystoreFile(path string) ([]byte, error) {
	b, err := ReadKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	return b, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for syncing there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// keyFileName is go-ethereum's key file name: UTC--<created at, ISO 8601>--<address hex>.
func keyFileName(addr common.Address, t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("UTC--%04d-%02d-%02dT%02d-%02d-%02d.%09dZ--%s",
		t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(),
		hex.EncodeToString(addr[:]))
}

// skippedFile reports whether a keystore directory entry is not a key file: temporary files
// of an interrupted write (".name"), editor backups ("name~") and README files.
func skippedFile(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
		strings.HasPrefix(strings.ToUpper(name), "README")
}
