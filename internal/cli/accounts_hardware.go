package cli

// accounts new / import with --backend pkcs11 or awskms: keys made or put inside hardware.

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/wallet"
)

// addHardwareAccount generates a key in the target's hardware backend (priv nil) or imports
// priv onto it, records it for the owner and prints its address. An imported key's file is
// then deleted, and standard error says so.
func addHardwareAccount(ctx context.Context, env Env, sub, cfgPath string, target accountTarget, priv *ecdsa.PrivateKey) error {
	ctx, s, done, err := openStore(ctx, cfgPath, env.Stderr, 5*time.Minute)
	if err != nil {
		return err
	}
	defer done()
	backends, err := app.OpenKeyBackends(ctx, s.cfg, s.log)
	if err != nil {
		return err
	}
	keys := wallet.MemoryKeys(wallet.Deps{Logger: s.log})
	signers := wallet.NewSigners(keys, wallet.SignersDeps{Logger: s.log, Store: s.db, Backends: backends})
	defer signers.Close()
	b, ok := signers.Backend(target.backend)
	if !ok {
		return fmt.Errorf("accounts %s: --backend %s is not configured: set wallet.%s in %s", sub, target.backend, target.backend, cfgPath)
	}
	accounts := wallet.NewAccountsOf(signers, s.db)
	var addr common.Address
	if priv == nil {
		addr, err = accounts.CreateIn(ctx, b, target.owner, target.label)
	} else {
		addr, err = accounts.ImportIn(ctx, b, target.owner, priv, target.label)
	}
	if errors.Is(err, wallet.ErrKeyExists) {
		return fmt.Errorf("accounts %s: %w", sub, err)
	}
	if err != nil {
		return err
	}
	// The key signs and recovers to its address before it is reported created.
	digest := crypto.Keccak256([]byte("web3gate: the new key signs"))
	sig, err := signers.SignHash(ctx, addr, digest)
	if err == nil {
		err = wallet.VerifySignature(digest, sig, addr)
	}
	if err != nil {
		return fmt.Errorf("accounts %s: the new key of %s does not sign: %w", sub, addr.Hex(), err)
	}
	fmt.Fprintln(env.Stdout, addr.Hex())
	if priv != nil && target.file != "" {
		if err := shred(target.file); err != nil {
			fmt.Fprintf(env.Stderr, "WARNING: the key of %s is now on the %s token, but its file %s could not be deleted: %v. Delete it yourself, and every copy of it.\n",
				addr.Hex(), target.backend, target.file, err)
			return nil
		}
		fmt.Fprintf(env.Stderr, "DELETED %s: the key of %s now lives only on the %s token (non-extractable). Delete every other copy of it (backups, password managers, shell history).\n",
			target.file, addr.Hex(), target.backend)
	} else if priv != nil {
		fmt.Fprintf(env.Stderr, "The key of %s is now on the %s token (non-extractable). Delete every other copy of it.\n", addr.Hex(), target.backend)
	}
	return nil
}

// shred overwrites the file at path with zeros, syncs it and removes it. On a copy-on-write
// or journaling file system the old blocks may survive the overwrite: the message says to
// delete every other copy.
func shred(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().IsRegular() {
		_, err = f.Write(make([]byte, fi.Size()))
		if err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Remove(path)
}
