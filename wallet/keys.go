package wallet

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/web3gate/web3gate/store"
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
	// keyLookupTimeout bounds the read of a key the backend was asked for after start-up (a
	// store that does not answer fails the request rather than holding it).
	keyLookupTimeout = 5 * time.Second
	// maxKeyFile bounds the size of a key file read from the keystore (real ones are ~500 B).
	maxKeyFile = 64 << 10
)

// Deps are the collaborators of Keys.
type Deps struct {
	Logger *zap.Logger // named by the caller; nil: no logs
	// Store keeps the keys with wallet.keys.backend "store"; unused with "dir".
	Store *store.DB
}

// errNoKeyFile is returned by a keyBackend's find for an address it holds no key of.
var errNoKeyFile = errors.New("no key file")

// keyBackend is where Keys keeps the encrypted key files (go-ethereum V3 JSON, encrypted
// with the service passphrase): the keystore directory (dirBackend) or the store
// (storeBackend). Keys does the encryption, the decryption and the caching; a backend only
// reads and writes the encrypted files.
type keyBackend interface {
	// String says where the keys are, for logs: "dir PATH" or "store".
	String() string
	// wrongPassphraseHint completes the error of a key file the passphrase does not decrypt.
	wrongPassphraseHint() string
	// all returns every key file.
	all(ctx context.Context) ([]keyFile, error)
	// find returns the key file of addr, added since all by this or another process, or
	// errNoKeyFile.
	find(ctx context.Context, addr common.Address) (keyFile, error)
	// any reports whether there is any key file, without decrypting anything.
	any(ctx context.Context) (bool, error)
	// put stores keyJSON, the key of addr, durably, after verify has accepted it (as it will
	// be read back); a key of addr stored already is ErrKeyExists. It returns where the key
	// went, for logs.
	put(ctx context.Context, addr common.Address, keyJSON []byte, verify func([]byte) error) (string, error)
}

// keyFile is an encrypted key as a backend holds it.
type keyFile struct {
	where string          // for logs and errors: the file's path, or the store row
	json  []byte          // the V3 key file
	addr  *common.Address // the address the backend files it under, if any
}

// Keys holds the service's private keys, decrypted once and kept in memory for fast,
// concurrent signing. Every key but those added with AddInMemory is also kept in the key
// backend (the keystore directory, or the store), encrypted with the service passphrase.
//
// Secrets (the passphrase, private keys) are only ever held behind pointers, so printing a
// Keys with fmt shows addresses of memory, and encoding it as JSON shows nothing; neither
// appears in a log line or an error.
type Keys struct {
	backend  keyBackend // nil: memory only
	pass     *passphrase
	passFrom string // where pass came from, for errors: "env NAME" or "file PATH"
	scryptN  int
	scryptP  int
	log      *zap.Logger
	unlocks  chan struct{} // bounds the decryptions of keys found after start-up

	mu      sync.RWMutex
	keys    map[common.Address]*ecdsa.PrivateKey
	pending map[common.Address]struct{} // being written by New or Import
	loading map[common.Address]*keyLoad // being looked up in the backend
	broken  map[common.Address]error    // found in the backend, but failed to decrypt
}

// keyLoad is a lookup of one address in the backend, which concurrent askers wait for.
type keyLoad struct {
	done chan struct{}
	key  *ecdsa.PrivateKey
	err  error
}

// newKeys is an empty Keys over backend (nil: memory only).
func newKeys(backend keyBackend, log *zap.Logger) *Keys {
	return &Keys{
		backend: backend,
		scryptN: keystore.StandardScryptN,
		scryptP: keystore.StandardScryptP,
		log:     log,
		unlocks: make(chan struct{}, maxUnlockWorkers),
		keys:    make(map[common.Address]*ecdsa.PrivateKey),
		pending: make(map[common.Address]struct{}),
		loading: make(map[common.Address]*keyLoad),
		broken:  make(map[common.Address]error),
	}
}

// OpenKeys resolves the passphrase (environment variable, else file), opens the key backend
// of cfg (the keystore directory, created with mode 0700 if missing, or the store of
// deps.Store) and decrypts every key in it, several at once. A key that does not decrypt with
// the passphrase fails the whole call; the error names the file (or the address, in the
// store).
//
// In the directory, files whose name starts with "." (temporary files of an interrupted
// write) or ends with "~", README files and subdirectories are skipped; any other file must
// be a key file.
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
	backend, err := openBackend(cfg, deps, log)
	if err != nil {
		return nil, err
	}
	k := newKeys(backend, log)
	k.pass, k.passFrom = pass, source
	if cfg.LightScrypt {
		k.scryptN, k.scryptP = keystore.LightScryptN, keystore.LightScryptP
		log.Warn("keystore: lightScrypt is on; new keys are weakly encrypted (tests and development only)")
	}
	start := time.Now()
	n, workers, err := k.unlockAll()
	if err != nil {
		return nil, err
	}
	log.Info("keystore unlocked",
		zap.Stringer("backend", backend), zap.String("passphrase_from", source),
		zap.Int("keys", n), zap.Int("workers", workers), zap.Duration("took", time.Since(start)))
	return k, nil
}

// openBackend opens the key backend cfg names.
func openBackend(cfg KeysConfig, deps Deps, log *zap.Logger) (keyBackend, error) {
	if cfg.Backend == KeysBackendStore {
		if deps.Store == nil {
			return nil, errors.New("keystore: wallet.keys.backend is store, but no store was given")
		}
		return &storeBackend{db: deps.Store}, nil
	}
	return openDirBackend(cfg.Dir, log)
}

// MemoryKeys holds keys in memory only, with no keystore: for a server without a keystore
// passphrase, which signs with the dev chain's accounts alone. New and Import answer
// ErrNoKeystore.
func MemoryKeys(deps Deps) *Keys {
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return newKeys(nil, log)
}

// HasKeyFiles reports whether the key backend of cfg (the keystore directory, or the store
// of deps.Store) holds any key, without decrypting anything.
func HasKeyFiles(cfg KeysConfig, deps Deps) (bool, error) {
	cfg.SetDefaults()
	if cfg.Backend == KeysBackendStore {
		if deps.Store == nil {
			return false, errors.New("keystore: wallet.keys.backend is store, but no store was given")
		}
		return (&storeBackend{db: deps.Store}).any(context.Background())
	}
	return (&dirBackend{dir: cfg.Dir}).any(context.Background())
}

// unlockAll decrypts every key of the backend into k.keys, up to maxUnlockWorkers at once,
// and stops at the first failure.
func (k *Keys) unlockAll() (keys, workers int, err error) {
	files, err := k.backend.all(context.Background())
	if err != nil {
		return 0, 0, err
	}
	if len(files) == 0 {
		return 0, 0, nil
	}
	unlocked, workers, err := k.unlockFiles(context.Background(), files)
	if err != nil {
		return 0, 0, err
	}
	seen := make(map[common.Address]string, len(files))
	for i, key := range unlocked {
		addr := crypto.PubkeyToAddress(key.PublicKey)
		if other, dup := seen[addr]; dup {
			k.log.Warn("keystore: two files hold the same key",
				zap.Stringer("address", addr), zap.String("file", files[i].where), zap.String("other", other))
			continue
		}
		seen[addr] = files[i].where
		k.keys[addr] = key
		if ce := k.log.Check(zap.DebugLevel, "key unlocked"); ce != nil {
			ce.Write(zap.Stringer("address", addr), zap.String("file", files[i].where))
		}
	}
	return len(k.keys), workers, nil
}

// unlockFiles decrypts files with the service passphrase, up to maxUnlockWorkers at once, and
// stops at the first failure (or when ctx ends).
func (k *Keys) unlockFiles(ctx context.Context, files []keyFile) (unlocked []*ecdsa.PrivateKey, workers int, err error) {
	workers = min(max(len(files), 1), runtime.GOMAXPROCS(0), maxUnlockWorkers)
	unlocked = make([]*ecdsa.PrivateKey, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i, f := range files {
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // another file failed: do not spend scrypt time on the rest
			}
			key, err := k.unlock(f)
			unlocked[i] = key
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return unlocked, workers, nil
}

// unlock decrypts one key file with the service passphrase.
func (k *Keys) unlock(f keyFile) (*ecdsa.PrivateKey, error) {
	key, err := decryptKey(f.json, k.pass.v, defaultKDFLimits())
	if errors.Is(err, keystore.ErrDecrypt) {
		return nil, fmt.Errorf("keystore: unlock %s: %w (from %s), %s: %w%s",
			f.where, ErrKeystorePassphrase, k.passFrom, k.backend.wrongPassphraseHint(), err, PassphraseHint(k.pass.v))
	}
	if err != nil {
		return nil, fmt.Errorf("keystore: unlock %s: %w", f.where, err)
	}
	if f.addr != nil && *f.addr != key.Address {
		return nil, fmt.Errorf("keystore: unlock %s: it holds the key of %s", f.where, key.Address.Hex())
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

// New creates a random key, stores it encrypted in the key backend and keeps it unlocked.
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
	where, err := k.keep(key)
	if err != nil {
		return common.Address{}, fmt.Errorf("new key: %w", err)
	}
	k.log.Info("key created", zap.Stringer("address", key.Address), zap.String("stored", where))
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
	where, err := k.keep(key)
	if errors.Is(err, ErrKeyExists) {
		return key.Address, fmt.Errorf("import key: %w", err)
	}
	if err != nil {
		return common.Address{}, fmt.Errorf("import key: %w", err)
	}
	k.log.Info("key imported", zap.Stringer("address", key.Address), zap.String("stored", where))
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

// Has reports whether the key of addr is held: unlocked already, or found in the backend
// (added by another process since start-up) and unlocked now.
func (k *Keys) Has(addr common.Address) bool {
	_, err := k.key(addr)
	return err == nil
}

// Addresses returns the addresses of every key unlocked, sorted.
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

// key returns the private key of addr, looking it up in the backend when it is not unlocked
// yet. A key not there is ErrUnknownAccount.
func (k *Keys) key(addr common.Address) (*ecdsa.PrivateKey, error) {
	k.mu.RLock()
	key, ok := k.keys[addr]
	k.mu.RUnlock()
	if ok {
		return key, nil
	}
	if k.backend == nil {
		return nil, fmt.Errorf("%w %s", ErrUnknownAccount, addr.Hex())
	}
	return k.load(addr)
}

// unlocked returns addr's key when it is in memory already, without asking the backend.
func (k *Keys) unlocked(addr common.Address) (*ecdsa.PrivateKey, bool) {
	k.mu.RLock()
	key, ok := k.keys[addr]
	k.mu.RUnlock()
	return key, ok
}

// load looks addr up in the backend and unlocks the key found, once for all who ask at the
// same time. The lookup takes no lock, so that asking about addresses the backend does not
// hold (eth_getTransactionCount of any address asks) costs one read and blocks no one. A key
// found but not decrypted is remembered as broken (its error is answered again without
// spending scrypt time on it); an address not found, or a backend error, is asked of the
// backend again next time.
func (k *Keys) load(addr common.Address) (*ecdsa.PrivateKey, error) {
	k.mu.RLock()
	err, broken := k.broken[addr]
	k.mu.RUnlock()
	if broken {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyLookupTimeout)
	f, err := k.backend.find(ctx, addr)
	cancel()
	if errors.Is(err, errNoKeyFile) {
		return nil, fmt.Errorf("%w %s", ErrUnknownAccount, addr.Hex())
	}
	if err != nil {
		k.log.Warn("key lookup failed", zap.Stringer("address", addr), zap.Error(err))
		return nil, fmt.Errorf("look up the key of %s: %w", addr.Hex(), err)
	}

	k.mu.Lock()
	if key, ok := k.keys[addr]; ok {
		k.mu.Unlock()
		return key, nil
	}
	if err, ok := k.broken[addr]; ok {
		k.mu.Unlock()
		return nil, err
	}
	if l, ok := k.loading[addr]; ok {
		k.mu.Unlock()
		<-l.done
		return l.key, l.err
	}
	l := &keyLoad{done: make(chan struct{})}
	k.loading[addr] = l
	k.mu.Unlock()

	l.key, l.err = k.unlockFound(addr, f)

	k.mu.Lock()
	delete(k.loading, addr)
	if l.err == nil {
		k.keys[addr] = l.key
	} else {
		k.broken[addr] = l.err
	}
	k.mu.Unlock()
	close(l.done)
	if l.err == nil {
		k.log.Info("key found in the backend and unlocked", zap.Stringer("address", addr), zap.Stringer("backend", k.backend))
	} else {
		k.log.Error("key found in the backend does not unlock; restart with the right passphrase",
			zap.Stringer("address", addr), zap.Error(l.err))
	}
	return l.key, l.err
}

// unlockFound decrypts f, the key file found for addr, with at most maxUnlockWorkers
// decryptions at once.
func (k *Keys) unlockFound(addr common.Address, f keyFile) (*ecdsa.PrivateKey, error) {
	k.unlocks <- struct{}{}
	defer func() { <-k.unlocks }()
	key, err := k.unlock(f)
	if err != nil {
		return nil, err
	}
	if got := crypto.PubkeyToAddress(key.PublicKey); got != addr {
		return nil, fmt.Errorf("keystore: %s holds the key of %s", f.where, got.Hex())
	}
	return key, nil
}

// keep encrypts key with the service passphrase, stores it in the backend and adds it to the
// keys held. The scrypt work runs outside the lock; the address is reserved meanwhile, so two
// stores of one key in this process cannot both succeed (across processes, the backend
// refuses the second: the store by its primary key).
func (k *Keys) keep(key *keystore.Key) (where string, err error) {
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
			delete(k.broken, addr)
		}
		k.mu.Unlock()
	}()
	keyJSON, err := keystore.EncryptKey(key, k.pass.v, k.scryptN, k.scryptP)
	if err != nil {
		return "", fmt.Errorf("encrypt: %w", err)
	}
	verify := func(written []byte) error {
		back, err := decryptKey(written, k.pass.v, defaultKDFLimits())
		if err != nil {
			return err
		}
		if back.Address != addr {
			return fmt.Errorf("holds %s, want %s", back.Address.Hex(), addr.Hex())
		}
		return nil
	}
	return k.backend.put(context.Background(), addr, keyJSON, verify)
}
