package softhsmtest

import (
	"bytes"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// AssertNoKeyBytes fails t when a file under dir holds priv (a raw private key), as bytes
// or in hex of either case. It names the file, never the key.
func AssertNoKeyBytes(t testing.TB, dir string, priv []byte) {
	t.Helper()
	if len(priv) == 0 {
		t.Fatal("AssertNoKeyBytes: empty key")
	}
	lower := []byte(hex.EncodeToString(priv))
	upper := bytes.ToUpper(lower)
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		switch {
		case bytes.Contains(b, priv):
			t.Errorf("%s holds the private key's bytes", path)
		case bytes.Contains(b, lower), bytes.Contains(b, upper):
			t.Errorf("%s holds the private key in hex", path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("AssertNoKeyBytes %s: %v", dir, err)
	}
	if files == 0 {
		t.Fatalf("AssertNoKeyBytes: no file under %s: nothing was checked", dir)
	}
}
