package wallet

// Signers: the one place that finds an account's signer, whichever backend holds its key.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// openTimeout bounds the opening of a hardware account's key (its record read, the key found
// in its backend): once per account and process, the signer is kept.
const openTimeout = 5 * time.Second

// SignersDeps are the collaborators of Signers.
type SignersDeps struct {
	Logger *zap.Logger // nil: no logs
	// Store holds the account records that say which backend holds a key; nil: keystore only.
	Store *store.DB
	// Backends are the hardware backends configured (PKCS#11, AWS KMS); none: keystore only.
	Backends []KeyBackend
	// Registry receives web3gate_sign_*; nil: not exported.
	Registry prometheus.Registerer
}

// Signers signs as any account the service holds: with the keystore (Keys, which also holds
// the dev chain's keys) or with the hardware backend the account's record names (its source
// and key reference). The nonce manager, eth_signTransaction and the sign stage
// (personal_sign, eth_sign, eth_signTypedData_v4) all sign through it, so every path works the
// same on every backend, and a deployment may mix backends (accounts move one at a time).
//
// Every signature a hardware backend returns is checked to recover to the account before it is
// used (the backends do, with SignatureFromRS); the keystore signs with the key itself.
type Signers struct {
	keys     *Keys
	db       *store.DB
	backends map[string]KeyBackend
	log      *zap.Logger
	metrics  *signMetrics

	mu       sync.RWMutex
	hardware map[common.Address]Signer // opened hardware signers, kept
}

// NewSigners builds the signers over keys (never nil: MemoryKeys for none) and deps.
func NewSigners(keys *Keys, deps SignersDeps) *Signers {
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Signers{keys: keys, db: deps.Store, backends: make(map[string]KeyBackend), log: log,
		metrics: newSignMetrics(deps.Registry), hardware: make(map[common.Address]Signer)}
	for _, b := range deps.Backends {
		s.backends[b.Name()] = b
	}
	for _, name := range []string{BackendKeystore, BackendPKCS11, BackendAWSKMS} {
		s.metrics.init(name)
	}
	return s
}

// Keys is the keystore the signers sign with for keystore and dev accounts.
func (s *Signers) Keys() *Keys { return s.keys }

// Backend is the hardware backend of that name, if configured.
func (s *Signers) Backend(name string) (KeyBackend, bool) {
	b, ok := s.backends[name]
	return b, ok
}

// Has reports whether the service can sign as addr: its key is in the keystore, or its
// account record names a configured hardware backend that holds it.
func (s *Signers) Has(addr common.Address) bool {
	_, err := s.find(context.Background(), addr)
	return err == nil
}

// find returns the hardware signer of addr, or nil when the keystore holds its key.
func (s *Signers) find(ctx context.Context, addr common.Address) (Signer, error) {
	s.mu.RLock()
	hw, ok := s.hardware[addr]
	s.mu.RUnlock()
	if ok {
		return hw, nil
	}
	_, kerr := s.keys.key(addr)
	if kerr == nil {
		return nil, nil
	}
	if len(s.backends) == 0 || s.db == nil || !errors.Is(kerr, ErrUnknownAccount) {
		return nil, kerr
	}
	return s.open(ctx, addr)
}

// open finds the account record of addr and opens its key in the backend it names.
func (s *Signers) open(ctx context.Context, addr common.Address) (Signer, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	acct, err := s.db.Account(ctx, addr)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w %s", ErrUnknownAccount, addr.Hex())
	}
	if err != nil {
		return nil, fmt.Errorf("look up the account %s: %w", addr.Hex(), err)
	}
	if acct.KeyRef == "" {
		// A keystore account whose key is not in the keystore.
		return nil, fmt.Errorf("%w %s", ErrUnknownAccount, addr.Hex())
	}
	b, ok := s.backends[acct.Source]
	if !ok {
		return nil, fmt.Errorf("%w: the key of %s is in %s, which this server does not configure (wallet.%s)",
			ErrSignerUnavailable, addr.Hex(), acct.Source, acct.Source)
	}
	hw, err := b.Open(ctx, acct.KeyRef, addr)
	if err != nil {
		s.metrics.fail(acct.Source, err)
		return nil, fmt.Errorf("open the key of %s in %s: %w", addr.Hex(), acct.Source, err)
	}
	s.mu.Lock()
	if other, ok := s.hardware[addr]; ok {
		hw = other
	} else {
		s.hardware[addr] = hw
	}
	s.mu.Unlock()
	s.log.Info("hardware key opened", zap.Stringer("address", addr), zap.String("backend", acct.Source))
	return hw, nil
}

// backendOf names the backend that signs as addr (BackendKeystore for keystore and dev keys).
func (s *Signers) backendOf(ctx context.Context, addr common.Address) (string, error) {
	hw, err := s.find(ctx, addr)
	if err != nil {
		return "", err
	}
	if hw != nil {
		return hw.Backend(), nil
	}
	return BackendKeystore, nil
}

// SignHash signs a 32-byte hash as addr and returns [R || S || V] with V in {0, 1}.
func (s *Signers) SignHash(ctx context.Context, addr common.Address, hash []byte) ([]byte, error) {
	if len(hash) != common.HashLength {
		return nil, fmt.Errorf("sign hash: must be %d bytes, got %d", common.HashLength, len(hash))
	}
	hw, err := s.find(ctx, addr)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var sig []byte
	backend := BackendKeystore
	if hw == nil {
		sig, err = s.keys.SignHash(addr, hash)
	} else {
		backend = hw.Backend()
		sig, err = hw.SignDigest(ctx, hash)
	}
	if err := s.signed(addr, backend, start, err); err != nil {
		return nil, err
	}
	return sig, nil
}

// signed records a signature as addr by backend, begun at start, in the metrics, and
// returns its error err (nil: none) naming the account and the backend.
func (s *Signers) signed(addr common.Address, backend string, start time.Time, err error) error {
	s.metrics.observe(backend, start)
	if err == nil {
		return nil
	}
	s.metrics.fail(backend, err)
	return fmt.Errorf("sign as %s (%s): %w", addr.Hex(), backend, err)
}

// SignTxUnlocked signs tx as SignTx does, but only with a key that is in this process's
// memory already (a keystore or dev key unlocked by an earlier use; hardware keys never are):
// ok is false, and nothing is signed, for any other account, whose signature may wait (a key
// file to decrypt, an HSM or a KMS to ask). It never waits, so that the nonce manager can
// sign inside the store transaction that reserves the nonce.
func (s *Signers) SignTxUnlocked(addr common.Address, tx *types.Transaction, chainID *big.Int) (signed *types.Transaction, ok bool, err error) {
	key, ok := s.keys.unlocked(addr)
	if !ok {
		return nil, false, nil
	}
	signed, err = signTx(tx, chainID, func(hash []byte) ([]byte, error) {
		start := time.Now()
		sig, err := crypto.Sign(hash, key)
		return sig, s.signed(addr, BackendKeystore, start, err)
	})
	return signed, true, err
}

// SignTx signs tx as addr for the chain chainID with go-ethereum's latest signer for that
// chain: EIP-155 for legacy transactions, EIP-2930 and EIP-1559 for types 1 and 2. Blob and
// set-code transactions (types 3 and 4) are refused. A chain id inside tx must equal chainID.
func (s *Signers) SignTx(ctx context.Context, addr common.Address, tx *types.Transaction, chainID *big.Int) (*types.Transaction, error) {
	return signTx(tx, chainID, func(hash []byte) ([]byte, error) { return s.SignHash(ctx, addr, hash) })
}

// signTx signs tx for the chain chainID (see SignTx), the signature of its hash made by sign.
func signTx(tx *types.Transaction, chainID *big.Int, sign func(hash []byte) ([]byte, error)) (*types.Transaction, error) {
	if err := checkSignable(tx, chainID); err != nil {
		return nil, err
	}
	signer := types.LatestSignerForChainID(chainID)
	sig, err := sign(signer.Hash(tx).Bytes())
	if err != nil {
		return nil, err
	}
	signed, err := tx.WithSignature(signer, sig)
	if err != nil {
		return nil, fmt.Errorf("sign transaction: %w", err)
	}
	return signed, nil
}

// SignText signs msg as addr the way personal_sign and eth_sign do (EIP-191 version 0x45) and
// returns [R || S || V] with V in {27, 28}, as wallets return it.
func (s *Signers) SignText(ctx context.Context, addr common.Address, msg []byte) ([]byte, error) {
	sig, err := s.SignHash(ctx, addr, accounts.TextHash(msg))
	if err != nil {
		return nil, err
	}
	sig[crypto.RecoveryIDOffset] += 27
	return sig, nil
}

// SignTypedData signs EIP-712 typed data as addr (eth_signTypedData_v4) and returns
// [R || S || V] with V in {27, 28}.
func (s *Signers) SignTypedData(ctx context.Context, addr common.Address, data apitypes.TypedData) ([]byte, error) {
	if _, err := s.find(ctx, addr); err != nil {
		return nil, err
	}
	hash, _, err := apitypes.TypedDataAndHash(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTypedData, err)
	}
	sig, err := s.SignHash(ctx, addr, hash)
	if err != nil {
		return nil, err
	}
	sig[crypto.RecoveryIDOffset] += 27
	return sig, nil
}

// Close closes the hardware backends.
func (s *Signers) Close() error {
	var errs []error
	for _, b := range s.backends {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", b.Name(), err))
		}
	}
	return errors.Join(errs...)
}
