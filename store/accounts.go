package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Account sources.
const (
	SourceKeystore = "keystore" // a key in the encrypted keystore
	SourceDev      = "dev"      // a pre-funded account of the embedded dev chain
	SourcePKCS11   = "pkcs11"   // a key on a PKCS#11 token (an HSM), KeyRef its CKA_ID
	SourceAWSKMS   = "awskms"   // a key in AWS KMS, KeyRef its key id
)

// Account is an EVM account the service holds, owned by one principal.
type Account struct {
	Address common.Address
	Owner   string // the principal
	Source  string // where the key lives: SourceKeystore, SourceDev, SourcePKCS11, SourceAWSKMS
	// KeyRef finds the key inside a hardware backend (SourcePKCS11, SourceAWSKMS); empty
	// for the others.
	KeyRef    string
	CreatedAt time.Time
}

func addressKey(a common.Address) string { return strings.ToLower(a.Hex()) }

// AddAccount records a. A zero CreatedAt is set to now. An address held already is ErrExists.
func (db *DB) AddAccount(ctx context.Context, a Account) error {
	switch {
	case a.Address == (common.Address{}):
		return errors.New("add account: address is the zero address")
	case a.Owner == "":
		return errors.New("add account: owner is empty")
	case a.Source != SourceKeystore && a.Source != SourceDev && a.Source != SourcePKCS11 && a.Source != SourceAWSKMS:
		return fmt.Errorf("add account: unknown source %q", a.Source)
	case (a.Source == SourcePKCS11 || a.Source == SourceAWSKMS) != (a.KeyRef != ""):
		return fmt.Errorf("add account: a %s account needs a key reference exactly when its key is in hardware", a.Source)
	}
	if a.KeyRef != "" {
		if err := CheckText("add account: key reference", a.KeyRef); err != nil {
			return err
		}
	}
	if err := CheckText("add account: owner", a.Owner); err != nil {
		return err
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = time.Now()
	}
	err := db.Write(ctx, func(dbtx *DBTx) error {
		_, err := dbtx.ExecContext(ctx, qAddAccount,
			addressKey(a.Address), a.Owner, a.Source, a.KeyRef, formatTime(a.CreatedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("add account %s: %w", a.Address.Hex(), err)
	}
	return nil
}

// Account is the account at address, or ErrNotFound.
func (db *DB) Account(ctx context.Context, address common.Address) (Account, error) {
	var a Account
	err := db.Read(ctx, func(dbtx *DBTx) error {
		row := dbtx.QueryRowContext(ctx, qAccount, addressKey(address))
		var err error
		a, err = scanAccount(row)
		return err
	})
	if err != nil {
		return Account{}, fmt.Errorf("account %s: %w", address.Hex(), err)
	}
	return a, nil
}

// AccountsOf are the accounts owner holds, oldest first (ties by address).
func (db *DB) AccountsOf(ctx context.Context, owner string) ([]Account, error) {
	if !validText(owner) {
		return nil, nil // no stored owner is such text
	}
	accts, err := db.queryAccounts(ctx,
		`SELECT address, owner, source, key_ref, created_at FROM accounts WHERE owner = ? ORDER BY created_at, address`, owner)
	if err != nil {
		return nil, fmt.Errorf("accounts of %q: %w", owner, err)
	}
	return accts, nil
}

// AllAccounts are all accounts, oldest first (ties by address).
func (db *DB) AllAccounts(ctx context.Context) ([]Account, error) {
	accts, err := db.queryAccounts(ctx,
		`SELECT address, owner, source, key_ref, created_at FROM accounts ORDER BY created_at, address`)
	if err != nil {
		return nil, fmt.Errorf("all accounts: %w", err)
	}
	return accts, nil
}

func (db *DB) queryAccounts(ctx context.Context, query string, args ...any) ([]Account, error) {
	var accts []Account
	err := db.Read(ctx, func(dbtx *DBTx) error {
		rows, err := dbtx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanAccount(rows)
			if err != nil {
				return err
			}
			accts = append(accts, a)
		}
		return rows.Err()
	})
	return accts, err
}

type scanner interface{ Scan(dest ...any) error }

func scanAccount(s scanner) (Account, error) {
	var addr, created string
	var a Account
	if err := s.Scan(&addr, &a.Owner, &a.Source, &a.KeyRef, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Account{}, ErrNotFound
		}
		return Account{}, err
	}
	if !common.IsHexAddress(addr) {
		return Account{}, fmt.Errorf("stored address %q is malformed", addr)
	}
	a.Address = common.HexToAddress(addr)
	t, err := parseTime(created)
	if err != nil {
		return Account{}, fmt.Errorf("account %s: created_at: %w", addr, err)
	}
	a.CreatedAt = t
	return a, nil
}

// Queries prepared once at Open (see prepared).
var (
	qAddAccount = prepared(`INSERT INTO accounts (address, owner, source, key_ref, created_at) VALUES (?, ?, ?, ?, ?)`)
	qAccount    = prepared(`SELECT address, owner, source, key_ref, created_at FROM accounts WHERE address = ?`)
)
