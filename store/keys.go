package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// StoredKey is the encrypted key of an account kept in the store (wallet.keys.backend:
// store): a V3 key file, encrypted with the keystore passphrase. The store never sees a key
// in clear; an error of this file never quotes JSON.
type StoredKey struct {
	Address   common.Address
	JSON      []byte
	CreatedAt time.Time
}

// AddKey records k. A zero CreatedAt is set to now. An address with a key already is
// ErrExists.
func (db *DB) AddKey(ctx context.Context, k StoredKey) error {
	switch {
	case k.Address == (common.Address{}):
		return errors.New("add key: address is the zero address")
	case len(k.JSON) == 0:
		return errors.New("add key: empty key file")
	}
	if err := CheckText("add key: key file", string(k.JSON)); err != nil {
		return err
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now()
	}
	err := db.Write(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, qAddKey, addressKey(k.Address), string(k.JSON), formatTime(k.CreatedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("add key %s: %w", k.Address.Hex(), err)
	}
	return nil
}

// Key is the stored key of address, or ErrNotFound.
func (db *DB) Key(ctx context.Context, address common.Address) (StoredKey, error) {
	var k StoredKey
	err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		k, err = scanKey(dbtx.QueryRowContext(ctx, qKey, addressKey(address)))
		return err
	})
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: %w", address.Hex(), err)
	}
	return k, nil
}

// AllKeys are every stored key, oldest first (ties by address).
func (db *DB) AllKeys(ctx context.Context) ([]StoredKey, error) {
	var keys []StoredKey
	err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, `SELECT address, key_json, created_at FROM account_keys ORDER BY created_at, address`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k, err := scanKey(rows)
			if err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("all keys: %w", err)
	}
	return keys, nil
}

// HasKeys reports whether the store holds any key.
func (db *DB) HasKeys(ctx context.Context) (bool, error) {
	var n int
	err := db.Read(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT address FROM account_keys LIMIT 1) AS k`).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("any key: %w", err)
	}
	return n > 0, nil
}

func scanKey(s scanner) (StoredKey, error) {
	var addr, keyJSON, created string
	if err := s.Scan(&addr, &keyJSON, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return StoredKey{}, ErrNotFound
		}
		return StoredKey{}, err
	}
	if !common.IsHexAddress(addr) {
		return StoredKey{}, fmt.Errorf("stored key address %q is malformed", addr)
	}
	t, err := parseTime(created)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: created_at: %w", addr, err)
	}
	return StoredKey{Address: common.HexToAddress(addr), JSON: []byte(keyJSON), CreatedAt: t}, nil
}

// Queries prepared once at Open (see prepared).
var (
	qAddKey = prepared(`INSERT INTO account_keys (address, key_json, created_at) VALUES (?, ?, ?)`)
	qKey    = prepared(`SELECT address, key_json, created_at FROM account_keys WHERE address = ?`)
)
