package wallet

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/store"
)

// ErrNotHeld is returned when an account is not held for the principal asking (whether it
// does not exist or belongs to someone else: the two are not told apart).
var ErrNotHeld = errors.New("account not held for this principal")

// ErrHeldByOther is returned when importing a key another principal already holds.
var ErrHeldByOther = errors.New("the key is held for another principal")

// Accounts ties the keys the service holds to the principals they belong to.
type Accounts struct {
	keys    *Keys
	signers *Signers // which accounts can be signed for, hardware ones included
	db      *store.DB
	held    sync.Map // holding{owner, addr} -> struct{}: ownership seen in the store
}

type holding struct {
	owner string
	addr  common.Address
}

// NewAccounts builds the account service over the keystore's keys and their ownership
// records, with no hardware backend.
func NewAccounts(keys *Keys, db *store.DB) *Accounts {
	return NewAccountsOf(NewSigners(keys, SignersDeps{Store: db}), db)
}

// NewAccountsOf builds the account service over every signer (the keystore's and the
// hardware backends') and the ownership records.
func NewAccountsOf(signers *Signers, db *store.DB) *Accounts {
	return &Accounts{keys: signers.Keys(), signers: signers, db: db}
}

// Create makes a new key for owner.
func (a *Accounts) Create(ctx context.Context, owner string) (common.Address, error) {
	addr, err := a.keys.New()
	if err != nil {
		return common.Address{}, err
	}
	if err := a.db.AddAccount(ctx, store.Account{Address: addr, Owner: owner, Source: store.SourceKeystore}); err != nil {
		return common.Address{}, fmt.Errorf("record owner of %s: %w", addr.Hex(), err)
	}
	return addr, nil
}

// CreateIn makes a new key for owner inside a hardware backend (a PKCS#11 token, a KMS): the
// key is generated there, not extractable, and the account records its backend and reference.
func (a *Accounts) CreateIn(ctx context.Context, b KeyBackend, owner, label string) (common.Address, error) {
	ref, err := b.Generate(ctx, label)
	if err != nil {
		return common.Address{}, fmt.Errorf("generate a key in %s: %w", b.Name(), err)
	}
	return a.recordHardware(ctx, b, owner, ref)
}

// ImportIn puts key into a hardware backend for owner (where the backend can import), not
// extractable from then on. The caller removes every other copy of the key.
func (a *Accounts) ImportIn(ctx context.Context, b KeyBackend, owner string, key *ecdsa.PrivateKey, label string) (common.Address, error) {
	addr := crypto.PubkeyToAddress(key.PublicKey)
	if acc, err := a.db.Account(ctx, addr); err == nil {
		if acc.Owner != owner {
			return common.Address{}, ErrHeldByOther
		}
		return addr, fmt.Errorf("%w: %s is held already (%s)", ErrKeyExists, addr.Hex(), acc.Source)
	} else if !errors.Is(err, store.ErrNotFound) {
		return common.Address{}, err
	}
	ref, err := b.Import(ctx, key, label)
	if err != nil {
		return common.Address{}, fmt.Errorf("import the key of %s into %s: %w", addr.Hex(), b.Name(), err)
	}
	if ref.Address != addr {
		return common.Address{}, fmt.Errorf("import into %s: the backend reports %s for the key of %s", b.Name(), ref.Address.Hex(), addr.Hex())
	}
	return a.recordHardware(ctx, b, owner, ref)
}

// recordHardware records owner as the owner of the hardware key ref.
func (a *Accounts) recordHardware(ctx context.Context, b KeyBackend, owner string, ref KeyRef) (common.Address, error) {
	acct := store.Account{Address: ref.Address, Owner: owner, Source: b.Name(), KeyRef: ref.Ref}
	if err := a.db.AddAccount(ctx, acct); err != nil {
		return common.Address{}, fmt.Errorf("record the owner of %s (key %s in %s): %w", ref.Address.Hex(), ref.Ref, b.Name(), err)
	}
	return ref.Address, nil
}

// Import adds a V3 key file for owner. Importing a key the owner already holds again is
// ErrKeyExists; a key someone else holds is ErrHeldByOther.
func (a *Accounts) Import(ctx context.Context, owner string, keyJSON []byte, filePassphrase string) (common.Address, error) {
	addr, err := a.keys.Import(keyJSON, filePassphrase)
	return a.recordImport(ctx, owner, addr, err)
}

// ImportKey adds a private key (raw, or decrypted by DecryptKeyFile) for owner, with Import's
// rules.
func (a *Accounts) ImportKey(ctx context.Context, owner string, key *ecdsa.PrivateKey) (common.Address, error) {
	addr, err := a.keys.ImportKey(key)
	return a.recordImport(ctx, owner, addr, err)
}

// recordImport records owner as the owner of addr, the result (addr, err) of an import into
// the keystore, unless the key was already there for someone.
func (a *Accounts) recordImport(ctx context.Context, owner string, addr common.Address, err error) (common.Address, error) {
	if err != nil && !errors.Is(err, ErrKeyExists) {
		return common.Address{}, err
	}
	if errors.Is(err, ErrKeyExists) {
		acc, lerr := a.db.Account(ctx, addr)
		switch {
		case lerr == nil && acc.Owner == owner:
			return addr, ErrKeyExists
		case lerr == nil:
			return common.Address{}, ErrHeldByOther
		case !errors.Is(lerr, store.ErrNotFound):
			return common.Address{}, lerr
		}
		// The key file exists but no owner was recorded (an interrupted import): adopt it.
	}
	if err := a.db.AddAccount(ctx, store.Account{Address: addr, Owner: owner, Source: store.SourceKeystore}); err != nil {
		return common.Address{}, fmt.Errorf("record owner of %s: %w", addr.Hex(), err)
	}
	return addr, nil
}

// List returns owner's accounts, or every account when owner is empty.
func (a *Accounts) List(ctx context.Context, owner string) ([]store.Account, error) {
	if owner == "" {
		return a.db.AllAccounts(ctx)
	}
	return a.db.AccountsOf(ctx, owner)
}

// Holds returns nil when addr is held for owner and its key is loaded, else ErrNotHeld.
func (a *Accounts) Holds(ctx context.Context, owner string, addr common.Address) error {
	if !a.signers.Has(addr) {
		return ErrNotHeld
	}
	// An account never changes owner (there is no transfer), so a positive answer is kept.
	if _, ok := a.held.Load(holding{owner, addr}); ok {
		return nil
	}
	acc, err := a.db.Account(ctx, addr)
	if errors.Is(err, store.ErrNotFound) || (err == nil && acc.Owner != owner) {
		return ErrNotHeld
	}
	if err == nil {
		a.held.Store(holding{owner, addr}, struct{}{})
	}
	return err
}

// AdoptDev loads the dev chain's keys in memory and records them as owner's. A dev account
// already recorded for another principal is an error: the dev keys are public.
func (a *Accounts) AdoptDev(ctx context.Context, owner string, keys []*ecdsa.PrivateKey) error {
	for _, k := range keys {
		addr := crypto.PubkeyToAddress(k.PublicKey)
		err := a.db.AddAccount(ctx, store.Account{Address: addr, Owner: owner, Source: store.SourceDev})
		if errors.Is(err, store.ErrExists) {
			acc, lerr := a.db.Account(ctx, addr)
			if lerr != nil {
				return lerr
			}
			if acc.Owner != owner {
				return fmt.Errorf("dev account %s is recorded for principal %q, not %q", addr.Hex(), acc.Owner, owner)
			}
			err = nil
		}
		if err != nil {
			return err
		}
		a.keys.AddInMemory(k)
	}
	return nil
}
