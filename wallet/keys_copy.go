package wallet

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"go.uber.org/zap"
)

// CopyResult says what CopyKeys did.
type CopyResult struct {
	Copied  int // keys written to the destination
	Present int // keys the destination held already
}

// CopyKeys copies every key of the key backend of from into the key backend of to, as they
// are: the V3 key files keep their encryption, and no key is re-encrypted or written in the
// clear. It moves an installation between the keystore directory and the store (accounts
// import-keystore, accounts export-keystore). Both configurations share the service
// passphrase (resolved from to): every key is decrypted with it first, several at once, and
// the copy stops before writing anything if one does not decrypt, so that the destination
// never holds a key its processes cannot unlock. A destination directory must hold no key
// file yet (a directory cannot tell a second copy of a key from a first); a key the store
// holds already is counted as present and left alone.
func CopyKeys(ctx context.Context, from, to KeysConfig, deps Deps) (CopyResult, error) {
	for _, c := range []*KeysConfig{&from, &to} {
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			return CopyResult{}, fmt.Errorf("keys config: %w", err)
		}
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	pass, passFrom, err := resolvePassphrase(to)
	if err != nil {
		return CopyResult{}, err
	}
	src, err := openBackend(from, deps, log)
	if err != nil {
		return CopyResult{}, err
	}
	dst, err := openBackend(to, deps, log)
	if err != nil {
		return CopyResult{}, err
	}
	if src.String() == dst.String() {
		return CopyResult{}, fmt.Errorf("keystore: copy from %s into itself", src)
	}
	if _, isDir := dst.(*dirBackend); isDir {
		has, err := dst.any(ctx)
		if err != nil {
			return CopyResult{}, err
		}
		if has {
			return CopyResult{}, fmt.Errorf("keystore: %s holds key files already; copy into an empty directory", dst)
		}
	}

	files, err := src.all(ctx)
	if err != nil {
		return CopyResult{}, err
	}
	// Decrypting proves the passphrase and the file, and gives the address to file it under.
	k := newKeys(src, log)
	k.pass, k.passFrom = pass, passFrom
	keys, _, err := k.unlockFiles(ctx, files)
	if err != nil {
		return CopyResult{}, err
	}

	var res CopyResult
	seen := make(map[common.Address]bool, len(files))
	for i, f := range files {
		addr := crypto.PubkeyToAddress(keys[i].PublicKey)
		if seen[addr] {
			log.Warn("keystore: two files hold the same key; copied once", zap.Stringer("address", addr), zap.String("file", f.where))
			continue
		}
		seen[addr] = true
		same := func(written []byte) error {
			if !bytes.Equal(written, f.json) {
				return errors.New("the key read back differs from the key written")
			}
			return nil
		}
		where, err := dst.put(ctx, addr, f.json, same)
		if errors.Is(err, ErrKeyExists) {
			res.Present++
			continue
		}
		if err != nil {
			return res, fmt.Errorf("keystore: copy the key of %s: %w", addr.Hex(), err)
		}
		res.Copied++
		log.Info("key copied", zap.Stringer("address", addr), zap.String("from", f.where), zap.String("to", where))
	}
	return res, nil
}
