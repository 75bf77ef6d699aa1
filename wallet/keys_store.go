package wallet

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/store"
)

// storeBackend keeps each key as a V3 key file in the store's account_keys table
// (wallet.keys.backend: store), encrypted as in the directory. Every process sharing the
// store sees every key: those present at start-up are decrypted then, one added later (by
// another replica, or the accounts command) when it is first asked for.
type storeBackend struct {
	db *store.DB
}

var _ keyBackend = (*storeBackend)(nil)

func (b *storeBackend) String() string { return "store" }

func (b *storeBackend) wrongPassphraseHint() string {
	return "or it was stored by a process with another keystore passphrase " +
		"(every process sharing the store needs the same one)"
}

func (b *storeBackend) all(ctx context.Context) ([]keyFile, error) {
	keys, err := b.db.AllKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	files := make([]keyFile, len(keys))
	for i, k := range keys {
		files[i] = storedKeyFile(k)
	}
	return files, nil
}

func (b *storeBackend) find(ctx context.Context, addr common.Address) (keyFile, error) {
	k, err := b.db.Key(ctx, addr)
	if errors.Is(err, store.ErrNotFound) {
		return keyFile{}, errNoKeyFile
	}
	if err != nil {
		return keyFile{}, fmt.Errorf("keystore: %w", err)
	}
	return storedKeyFile(k), nil
}

func (b *storeBackend) any(ctx context.Context) (bool, error) {
	has, err := b.db.HasKeys(ctx)
	if err != nil {
		return false, fmt.Errorf("keystore: %w", err)
	}
	return has, nil
}

// put checks keyJSON with verify and inserts it. The table's primary key makes a second
// insert of an address fail, in this process or another: ErrKeyExists.
func (b *storeBackend) put(ctx context.Context, addr common.Address, keyJSON []byte, verify func([]byte) error) (string, error) {
	if err := verify(keyJSON); err != nil {
		return "", fmt.Errorf("verify key: %w", err)
	}
	err := b.db.AddKey(ctx, store.StoredKey{Address: addr, JSON: keyJSON})
	if errors.Is(err, store.ErrExists) {
		return "", fmt.Errorf("%w: %s (in the store)", ErrKeyExists, addr.Hex())
	}
	if err != nil {
		return "", fmt.Errorf("store key: %w", err)
	}
	return "store", nil
}

func storedKeyFile(k store.StoredKey) keyFile {
	return keyFile{where: "the key of " + k.Address.Hex() + " in the store", json: k.JSON, addr: &k.Address}
}
