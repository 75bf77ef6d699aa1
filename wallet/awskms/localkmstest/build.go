package localkmstest

// Building local-kms: once per machine, with the ordinary Go tools, into the user's cache
// folder, from the module proxy at the pinned Version.

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Module and Version pin the local-kms that the tests run. Changing Version: update
// server/go.sum.txt too (go mod tidy in a copy of server/ renamed to .go / go.mod), or the
// build adds the missing sums from the checksum database.
const (
	Module  = "github.com/nsmithuk/local-kms"
	Version = "v0.0.0-20260228092603-2a5e92d09ab6"
)

// The loopback main (server/main.go.txt) and the sums of its dependencies. They are .txt so
// that this module neither compiles them nor needs local-kms's dependencies.
var (
	//go:embed server/main.go.txt
	mainSource []byte
	//go:embed server/go.sum.txt
	goSum []byte
)

func goMod() []byte {
	return []byte("module local-kms-loopback\n\ngo 1.20\n\nrequire " + Module + " " + Version + "\n")
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Build returns the path of the local-kms binary, building it on the first call on this
// machine (a few seconds, 20 with cold Go caches; the module proxy must be reachable then).
// The binary is cached under os.UserCacheDir()/web3gate-test/ (or the temporary folder's
// web3gate-cache/ without one), in a folder named by Version and a hash of the sources, so
// a change of either builds anew. Concurrent builds (test binaries of several
// packages) are safe: each builds aside and renames into place.
func Build() (string, error) {
	buildOnce.Do(func() { buildPath, buildErr = build() })
	return buildPath, buildErr
}

func build() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil { // no $HOME nor $XDG_CACHE_HOME: a CI runner's bare environment
		cache = filepath.Join(os.TempDir(), "web3gate-cache")
	}
	h := sha256.New()
	for _, b := range [][]byte{goMod(), mainSource, goSum} {
		h.Write(b)
	}
	dir := filepath.Join(cache, "web3gate-test", "local-kms-"+Version+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	bin := filepath.Join(dir, "local-kms-loopback")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("local-kms: %w", err)
	}
	src, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("local-kms: %w", err)
	}
	defer os.RemoveAll(src)
	for name, b := range map[string][]byte{"go.mod": goMod(), "go.sum": goSum, "main.go": mainSource} {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", fmt.Errorf("local-kms: %w", err)
		}
	}
	tmpBin := filepath.Join(src, "local-kms-loopback")
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmpBin, ".")
	cmd.Dir = src
	// Its own module, whatever the calling environment says; -mod=mod lets a go.sum.txt that
	// lags Version be completed (checked against the checksum database).
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("local-kms: go build %s@%s failed (the Go module proxy must be reachable on the first run): %w\n%s",
			Module, Version, err, out.String())
	}
	if err := os.Rename(tmpBin, bin); err != nil {
		return "", fmt.Errorf("local-kms: %w", err)
	}
	return bin, nil
}
