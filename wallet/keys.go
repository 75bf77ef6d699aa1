// Package wallet holds the service's EVM accounts and signs for them: key custody (an
// encrypted go-ethereum keystore, unlocked once into memory) and the signing primitives.
package wallet

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

var (
	// ErrUnknownAccount is returned when asked to sign for an address whose key is not held.
	ErrUnknownAccount = errors.New("unknown account")
	// ErrNoPassphrase is returned by OpenKeys when no keystore passphrase is configured.
	ErrNoPassphrase = errors.New("no keystore passphrase")
	// ErrNoKeystore is returned by New and Import on keys opened without a keystore.
	ErrNoKeystore = errors.New("no keystore: configure a keystore passphrase to create or import keys")
	// ErrKeyExists is returned by Import for a key that is already held.
	ErrKeyExists = errors.New("key already exists")
)

const (
	// maxUnlockWorkers bounds the keys decrypted at once at start-up: scrypt with the
	// standard parameters takes 256 MiB per decryption, so 4 workers peak near 1 GiB.
	maxUnlockWorkers = 4
	// maxKeyFile bounds the size of a key file read from the keystore (real ones are ~500 B).
	maxKeyFile = 64 << 10
)

// Deps are the collaborators of Keys.
type Deps struct {
	Logger *zap.Logger // named by the caller; nil: no logs
}

// Keys holds the service's private keys, decrypted once and kept in memory for fast,
// concurrent signing. Every key but those added with AddInMemory is also stored in the
// keystore directory, encrypted with the service passphrase.
//
// Secrets (the passphrase, private keys) are only ever held behind pointers, so printing a
// Keys with fmt shows addresses of memory, and encoding it as JSON shows nothing; neither
// appears in a log line or an error.
type Keys struct {
	dir      string
	pass     *passphrase
	passFrom string // where pass came from, for errors: "env NAME" or "file PATH"
	scryptN  int
	scryptP  int
	log      *zap.Logger

	mu      sync.RWMutex
	keys    map[common.Address]*ecdsa.PrivateKey
	pending map[common.Address]struct{} // being written by New or Import
}

// OpenKeys resolves the passphrase (environment variable, else file), opens the keystore
// directory (created with mode 0700 if missing) and decrypts every key file in it, several at
// once. A file that does not decrypt with the passphrase fails the whole call; the error
// names the file.
//
// Files whose name starts with "." (temporary files of an interrupted write) or ends with
// "~", README files and subdirectories are skipped; any other file must be a key file.
func OpenKeys(cfg KeysConfig, deps Deps) (*Keys, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("keys config: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	pass, source, err := resolvePassphrase(cfg)
	if err != nil {
		return nil, err
	}
	k := &Keys{
		dir:      cfg.Dir,
		pass:     pass,
		passFrom: source,
		scryptN:  keystore.StandardScryptN,
		scryptP:  keystore.StandardScryptP,
		log:      log,
		keys:     make(map[common.Address]*ecdsa.PrivateKey),
		pending:  make(map[common.Address]struct{}),
	}
	if cfg.LightScrypt {
		k.scryptN, k.scryptP = keystore.LightScryptN, keystore.LightScryptP
		log.Warn("keystore: lightScrypt is on; new keys are weakly encrypted (tests and development only)")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("keystore dir: %w", err)
	}
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("keystore dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("keystore dir %s: not a directory", cfg.Dir)
	}
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		log.Warn("keystore: directory is accessible to group or others; 0700 is recommended",
			zap.String("dir", cfg.Dir), zap.String("mode", fmt.Sprintf("%04o", perm)))
	}
	start := time.Now()
	n, workers, err := k.unlockAll()
	if err != nil {
		return nil, err
	}
	log.Info("keystore unlocked",
		zap.String("dir", cfg.Dir), zap.String("passphrase_from", source),
		zap.Int("keys", n), zap.Int("workers", workers), zap.Duration("took", time.Since(start)))
	return k, nil
}

// MemoryKeys holds keys in memory only, with no keystore: for a server without a keystore
// passphrase, which signs with the dev chain's accounts alone. New and Import answer
// ErrNoKeystore.
func MemoryKeys(deps Deps) *Keys {
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Keys{log: log, keys: make(map[common.Address]*ecdsa.PrivateKey), pending: make(map[common.Address]struct{})}
}

// HasKeyFiles reports whether the keystore directory of cfg holds any key file, without
// decrypting anything.
func HasKeyFiles(cfg KeysConfig) (bool, error) {
	cfg.SetDefaults()
	entries, err := os.ReadDir(cfg.Dir)
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

// unlockAll decrypts every key file of the keystore directory into k.keys, up to
// maxUnlockWorkers at once, and stops at the first failure.
func (k *Keys) unlockAll() (keys, workers int, err error) {
	entries, err := os.ReadDir(k.dir)
	if err != nil {
		return 0, 0, fmt.Errorf("keystore dir: %w", err)
	}
	var paths []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || skippedFile(name) {
			continue
		}
		paths = append(paths, filepath.Join(k.dir, name))
	}
	if len(paths) == 0 {
		return 0, 0, nil
	}
	workers = min(len(paths), runtime.GOMAXPROCS(0), maxUnlockWorkers)
	unlocked := make([]*ecdsa.PrivateKey, len(paths))
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(workers)
	for i, path := range paths {
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil // another file failed: do not spend scrypt time on the rest
			}
			key, err := k.unlockFile(path)
			unlocked[i] = key
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	files := make(map[common.Address]string, len(paths))
	for i, key := range unlocked {
		addr := crypto.PubkeyToAddress(key.PublicKey)
		if other, dup := files[addr]; dup {
			k.log.Warn("keystore: two files hold the same key",
				zap.Stringer("address", addr), zap.String("file", paths[i]), zap.String("other", other))
			continue
		}
		files[addr] = paths[i]
		k.keys[addr] = key
		if ce := k.log.Check(zap.DebugLevel, "key unlocked"); ce != nil {
			ce.Write(zap.Stringer("address", addr), zap.String("file", paths[i]))
		}
	}
	return len(k.keys), workers, nil
}

// unlockFile reads and decrypts one key file with the service passphrase.
func (k *Keys) unlockFile(path string) (*ecdsa.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("keystore: read %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("keystore: %s is larger than %d bytes: not a key file", path, maxKeyFile)
	}
	key, err := decryptKey(b, k.pass.v, defaultKDFLimits())
	if errors.Is(err, keystore.ErrDecrypt) {
		return nil, fmt.Errorf("keystore: unlock %s: %w (from %s), or the file was encrypted with another passphrase "+
			"(a key file from elsewhere is taken in with `web3gate accounts import`, not copied into the keystore): %w",
			path, ErrKeystorePassphrase, k.passFrom, err)
	}
	if err != nil {
		return nil, fmt.Errorf("keystore: unlock %s: %w", path, err)
	}
	return key.PrivateKey, nil
}

// decryptKey decrypts a V3 key file after checking its structure (see checkKeyFile) and
// checks that the address it declares, if any, is the address of the key it holds. Its errors
// carry neither the passphrase nor the file's content.
func decryptKey(keyJSON []byte, pass string, lim kdfLimits) (*keystore.Key, error) {
	declared, err := checkKeyFile(keyJSON, lim)
	if err != nil {
		return nil, err
	}
	key, err := keystore.DecryptKey(keyJSON, pass)
	if err != nil {
		return nil, err
	}
	if declared != nil && *declared != key.Address {
		return nil, fmt.Errorf("the file's address field does not match its key (%s)", key.Address.Hex())
	}
	return key, nil
}

// New creates a random key, stores it encrypted in the keystore directory and keeps it
// unlocked.
func (k *Keys) New() (common.Address, error) {
	if k.pass == nil {
		return common.Address{}, ErrNoKeystore
	}
	priv, err := crypto.GenerateKey()
	if err != nil {
		return common.Address{}, fmt.Errorf("new key: %w", err)
	}
	key, err := newKeyRecord(priv)
	if err != nil {
		return common.Address{}, fmt.Errorf("new key: %w", err)
	}
	path, err := k.store(key)
	if err != nil {
		return common.Address{}, fmt.Errorf("new key: %w", err)
	}
	k.log.Info("key created", zap.Stringer("address", key.Address), zap.String("file", path))
	return key.Address, nil
}

// newKeyRecord wraps priv in a keystore.Key with a new random (version 4) UUID.
func newKeyRecord(priv *ecdsa.PrivateKey) (*keystore.Key, error) {
	key := &keystore.Key{Address: crypto.PubkeyToAddress(priv.PublicKey), PrivateKey: priv}
	if _, err := io.ReadFull(rand.Reader, key.Id[:]); err != nil {
		return nil, err
	}
	key.Id[6] = key.Id[6]&0x0f | 0x40 // UUID version 4
	key.Id[8] = key.Id[8]&0x3f | 0x80 // RFC 4122 variant
	return key, nil
}

// Import decrypts keyJSON, a V3 key file, with filePassphrase (DecryptKeyFile: a wrong one
// gives ErrFilePassphrase), stores it re-encrypted with the service passphrase and keeps it
// unlocked. A key already held gives ErrKeyExists, with its address.
func (k *Keys) Import(keyJSON []byte, filePassphrase string) (common.Address, error) {
	if k.pass == nil {
		return common.Address{}, ErrNoKeystore
	}
	priv, err := DecryptKeyFile(keyJSON, filePassphrase)
	if err != nil {
		return common.Address{}, fmt.Errorf("import key: %w", err)
	}
	return k.ImportKey(priv)
}

// ImportKey stores priv (a raw private key, or one decrypted by DecryptKeyFile) encrypted
// with the service passphrase, under a new key id, and keeps it unlocked. A key already held
// gives ErrKeyExists, with its address.
func (k *Keys) ImportKey(priv *ecdsa.PrivateKey) (common.Address, error) {
	if k.pass == nil {
		return common.Address{}, ErrNoKeystore
	}
	key, err := newKeyRecord(priv)
	if err != nil {
		return common.Address{}, fmt.Errorf("import key: %w", err)
	}
	path, err := k.store(key)
	if errors.Is(err, ErrKeyExists) {
		return key.Address, fmt.Errorf("import key: %w", err)
	}
	if err != nil {
		return common.Address{}, fmt.Errorf("import key: %w", err)
	}
	k.log.Info("key imported", zap.Stringer("address", key.Address), zap.String("file", path))
	return key.Address, nil
}

// AddInMemory holds key unlocked without writing it anywhere (the dev chain's deterministic
// accounts). Adding a key already held changes nothing. key must not be nil.
func (k *Keys) AddInMemory(key *ecdsa.PrivateKey) common.Address {
	addr := crypto.PubkeyToAddress(key.PublicKey)
	k.mu.Lock()
	_, held := k.keys[addr]
	if !held {
		k.keys[addr] = key
	}
	k.mu.Unlock()
	if ce := k.log.Check(zap.DebugLevel, "in-memory key added"); ce != nil {
		ce.Write(zap.Stringer("address", addr), zap.Bool("already_held", held))
	}
	return addr
}

// Has reports whether the key of addr is held.
func (k *Keys) Has(addr common.Address) bool {
	k.mu.RLock()
	_, ok := k.keys[addr]
	k.mu.RUnlock()
	return ok
}

// Addresses returns the addresses of every key held, sorted.
func (k *Keys) Addresses() []common.Address {
	k.mu.RLock()
	addrs := make([]common.Address, 0, len(k.keys))
	for a := range k.keys {
		addrs = append(addrs, a)
	}
	k.mu.RUnlock()
	slices.SortFunc(addrs, func(a, b common.Address) int { return a.Cmp(b) })
	return addrs
}

// key returns the private key of addr.
func (k *Keys) key(addr common.Address) (*ecdsa.PrivateKey, error) {
	k.mu.RLock()
	key, ok := k.keys[addr]
	k.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrUnknownAccount, addr.Hex())
	}
	return key, nil
}

// store encrypts key with the service passphrase, writes it to a new file of the keystore
// directory and adds it to the keys held. The scrypt work runs outside the lock; the address
// is reserved meanwhile, so two stores of one key cannot both succeed.
func (k *Keys) store(key *keystore.Key) (path string, err error) {
	addr := key.Address
	k.mu.Lock()
	_, held := k.keys[addr]
	_, busy := k.pending[addr]
	if !held && !busy {
		k.pending[addr] = struct{}{}
	}
	k.mu.Unlock()
	if held || busy {
		return "", fmt.Errorf("%w: %s", ErrKeyExists, addr.Hex())
	}
	defer func() {
		k.mu.Lock()
		delete(k.pending, addr)
		if err == nil {
			k.keys[addr] = key.PrivateKey
		}
		k.mu.Unlock()
	}()
	keyJSON, err := keystore.EncryptKey(key, k.pass.v, k.scryptN, k.scryptP)
	if err != nil {
		return "", fmt.Errorf("encrypt: %w", err)
	}
	return k.writeKeyFile(addr, keyJSON)
}

// writeKeyFile writes keyJSON under go-ethereum's file name convention
// (UTC--<time>--<address>), atomically and durably: a temporary file (mode 0600) is written,
// synced, read back and decrypted with the service passphrase, then renamed into place, and
// the directory is synced. A key must not be reported created and then lost.
func (k *Keys) writeKeyFile(addr common.Address, keyJSON []byte) (path string, err error) {
	name := keyFileName(addr, time.Now())
	path = filepath.Join(k.dir, name)
	f, err := os.CreateTemp(k.dir, "."+name+".tmp*")
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
	back, err := decryptKey(written, k.pass.v, defaultKDFLimits())
	if err != nil {
		return "", fmt.Errorf("verify key file %s: %w", tmp, err)
	}
	if back.Address != addr {
		return "", fmt.Errorf("verify key file %s: holds %s, want %s", tmp, back.Address.Hex(), addr.Hex())
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	if err := syncDir(k.dir); err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	return path, nil
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
