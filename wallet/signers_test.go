package wallet

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"math/big"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/store"
)

// rawBackend is a KeyBackend for the routing tests of Signers: its keys sign with
// go-ethereum and answer r || s as a PKCS#11 token does, half of them with the high s that
// tokens return as often as not, so that SignatureFromRaw's normalisation is on the path.
// The real backends are tested against SoftHSM2 and local-kms in their own packages.
type rawBackend struct {
	name string
	mu   sync.Mutex
	keys map[string]*ecdsa.PrivateKey
	down bool // every signature fails as unavailable
	n    int
}

func newRawBackend(name string) *rawBackend {
	return &rawBackend{name: name, keys: map[string]*ecdsa.PrivateKey{}}
}

func (b *rawBackend) Name() string { return b.name }

func (b *rawBackend) Generate(ctx context.Context, label string) (KeyRef, error) {
	priv, err := crypto.GenerateKey()
	if err != nil {
		return KeyRef{}, err
	}
	return b.Import(ctx, priv, label)
}

func (b *rawBackend) Import(_ context.Context, priv *ecdsa.PrivateKey, _ string) (KeyRef, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	ref := hex.EncodeToString([]byte{byte(b.n)})
	b.keys[ref] = priv
	return KeyRef{Ref: ref, Address: crypto.PubkeyToAddress(priv.PublicKey)}, nil
}

func (b *rawBackend) Open(_ context.Context, ref string, addr common.Address) (Signer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.keys[ref]
	if !ok || crypto.PubkeyToAddress(k.PublicKey) != addr {
		return nil, errors.New("no such key")
	}
	return &rawSigner{b: b, key: k, addr: addr}, nil
}

func (b *rawBackend) Close() error { return nil }

type rawSigner struct {
	b    *rawBackend
	key  *ecdsa.PrivateKey
	addr common.Address
	high bool
}

func (s *rawSigner) Address() common.Address { return s.addr }
func (s *rawSigner) Backend() string         { return s.b.name }

func (s *rawSigner) SignDigest(_ context.Context, digest []byte) ([]byte, error) {
	s.b.mu.Lock()
	down := s.b.down
	s.high = !s.high
	high := s.high
	s.b.mu.Unlock()
	if down {
		return nil, errors.Join(ErrSignerUnavailable, errors.New("token removed"))
	}
	sig, err := crypto.Sign(digest, s.key)
	if err != nil {
		return nil, err
	}
	rs := append([]byte(nil), sig[:64]...)
	if high {
		hs := new(big.Int).Sub(secp256k1N, new(big.Int).SetBytes(rs[32:]))
		hs.FillBytes(rs[32:])
	}
	return SignatureFromRaw(digest, rs, s.addr)
}

func TestSignatureFromRS(t *testing.T) {
	key, _ := crypto.GenerateKey()
	addr := crypto.PubkeyToAddress(key.PublicKey)
	for i := range 64 {
		digest := crypto.Keccak256([]byte{byte(i)})
		want, err := crypto.Sign(digest, key)
		if err != nil {
			t.Fatal(err)
		}
		r, s := new(big.Int).SetBytes(want[:32]), new(big.Int).SetBytes(want[32:64])
		for _, sv := range []*big.Int{s, new(big.Int).Sub(secp256k1N, s)} {
			got, err := SignatureFromRS(digest, r, sv, addr)
			if err != nil {
				t.Fatalf("digest %d: %v", i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("digest %d: got %x, want %x", i, got, want)
			}
			if err := VerifySignature(digest, got, addr); err != nil {
				t.Fatal(err)
			}
		}
	}
	digest := crypto.Keccak256([]byte("x"))
	sig, _ := crypto.Sign(digest, key)
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	other := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	for name, err := range map[string]error{
		"another address": func() error { _, err := SignatureFromRS(digest, r, s, other); return err }(),
		"r zero":          func() error { _, err := SignatureFromRS(digest, new(big.Int), s, addr); return err }(),
		"s = n":           func() error { _, err := SignatureFromRS(digest, r, secp256k1N, addr); return err }(),
		"short raw":       func() error { _, err := SignatureFromRaw(digest, sig[:63], addr); return err }(),
	} {
		if !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	high := append([]byte(nil), sig...)
	new(big.Int).Sub(secp256k1N, s).FillBytes(high[32:64])
	if err := VerifySignature(digest, high, addr); !errors.Is(err, ErrBadSignature) {
		t.Errorf("VerifySignature of a high s: %v, want ErrBadSignature", err)
	}
}

// mixedSigners is a keystore and a test "pkcs11" backend over one SQLite store, as a server
// that configures a token holds them.
type mixedSigners struct {
	keys    *Keys
	db      *store.DB
	hsm     *rawBackend
	signers *Signers
	accts   *Accounts
}

// newMixedSigners opens a mixedSigners in a temporary directory, its sign metrics in reg
// (nil: not exported).
func newMixedSigners(t *testing.T, reg prometheus.Registerer) *mixedSigners {
	t.Helper()
	dir := t.TempDir()
	m := &mixedSigners{keys: openTest(t, filepath.Join(dir, "keystore"), "service passphrase"), hsm: newRawBackend(BackendPKCS11)}
	db, err := store.Open(context.Background(), testStoreConfig(t, filepath.Join(dir, "web3gate.db")), store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m.db = db
	m.signers = NewSigners(m.keys, SignersDeps{Store: db, Backends: []KeyBackend{m.hsm}, Registry: reg})
	m.accts = NewAccountsOf(m.signers, db)
	return m
}

// TestSignersMixBackends: one Signers signs for a keystore account and for two hardware
// accounts (generated, imported), every path the same; a backend that is down is
// ErrSignerUnavailable, counted; an account of a backend not configured is refused clearly.
func TestSignersMixBackends(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := newMixedSigners(t, reg)
	keys, db, hsm, signers, accts := m.keys, m.db, m.hsm, m.signers, m.accts

	soft, err := accts.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	gen, err := accts.CreateIn(ctx, hsm, "alice", "generated")
	if err != nil {
		t.Fatal(err)
	}
	imported, _ := crypto.GenerateKey()
	imp, err := accts.ImportIn(ctx, hsm, "bob", imported, "imported")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accts.ImportIn(ctx, hsm, "alice", imported, "again"); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("importing bob's key for alice: %v, want ErrHeldByOther", err)
	}
	for addr, backend := range map[common.Address]string{soft: BackendKeystore, gen: BackendPKCS11, imp: BackendPKCS11} {
		if got, err := signers.backendOf(ctx, addr); err != nil || got != backend {
			t.Fatalf("backendOf(%s) = %q, %v; want %q", addr.Hex(), got, err, backend)
		}
		if err := accts.Holds(ctx, map[common.Address]string{soft: "alice", gen: "alice", imp: "bob"}[addr], addr); err != nil {
			t.Fatalf("Holds(%s): %v", addr.Hex(), err)
		}
		chainID := big.NewInt(31337)
		for i := range 4 {
			tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: uint64(i), GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &addr})
			signed, err := signers.SignTx(ctx, addr, tx, chainID)
			if err != nil {
				t.Fatal(err)
			}
			if from, err := types.Sender(types.LatestSignerForChainID(chainID), signed); err != nil || from != addr {
				t.Fatalf("%s: signed by %s, %v", backend, from.Hex(), err)
			}
			sig, err := signers.SignText(ctx, addr, []byte("hello"))
			if err != nil {
				t.Fatal(err)
			}
			sig[crypto.RecoveryIDOffset] -= 27
			if err := VerifySignature(accounts.TextHash([]byte("hello")), sig, addr); err != nil {
				t.Fatalf("%s: personal_sign: %v", backend, err)
			}
		}
	}
	if _, err := signers.SignTypedData(ctx, gen, mailExample(t)); err != nil {
		t.Fatal(err)
	}

	hsm.mu.Lock()
	hsm.down = true
	hsm.mu.Unlock()
	if _, err := signers.SignText(ctx, gen, []byte("x")); !errors.Is(err, ErrSignerUnavailable) {
		t.Fatalf("backend down: %v, want ErrSignerUnavailable", err)
	}
	if n := testutil.ToFloat64(signers.metrics.errors.WithLabelValues(BackendPKCS11, "unavailable")); n != 1 {
		t.Fatalf("web3gate_sign_errors_total{pkcs11,unavailable} = %v, want 1", n)
	}
	if n := testutil.CollectAndCount(reg, "web3gate_sign_duration_seconds"); n != 3 {
		t.Fatalf("web3gate_sign_duration_seconds has %d series, want one per backend (3)", n)
	}

	// The same store, opened by a server that does not configure the token.
	plain := NewSigners(keys, SignersDeps{Store: db})
	if plain.Has(gen) {
		t.Fatal("a server without the token claims the token's account")
	}
	noHSM := NewSigners(keys, SignersDeps{Store: db, Backends: []KeyBackend{newRawBackend(BackendAWSKMS)}})
	if _, err := noHSM.SignText(ctx, gen, []byte("x")); !errors.Is(err, ErrSignerUnavailable) {
		t.Fatalf("an account on a backend not configured: %v, want ErrSignerUnavailable naming it", err)
	}
}

// TestSignTxUnlocked: SignTxUnlocked signs only with a key in memory already (a keystore
// opened by this process unlocks its keys), never with a hardware key or for an unknown
// account, for which it signs nothing and says so; what it signs recovers to the account and
// equals SignTx's signature; what SignTx refuses, it refuses.
func TestSignTxUnlocked(t *testing.T) {
	ctx := context.Background()
	m := newMixedSigners(t, nil)
	hsm, signers, accts := m.hsm, m.signers, m.accts
	soft, err := accts.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	hard, err := accts.CreateIn(ctx, hsm, "alice", "generated")
	if err != nil {
		t.Fatal(err)
	}
	chainID := big.NewInt(31337)
	txFor := func(to common.Address) *types.Transaction {
		return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 3, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2), Gas: 21000, To: &to})
	}
	unknown := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	if _, err := signers.SignTx(ctx, hard, txFor(hard), chainID); err != nil {
		t.Fatal(err) // the hardware key opened and cached
	}
	for _, addr := range []common.Address{hard, unknown} {
		if signed, ok, err := signers.SignTxUnlocked(addr, txFor(addr), chainID); ok || signed != nil || err != nil {
			t.Fatalf("SignTxUnlocked(%s): %v, %v, %v; want nothing signed, not ok", addr.Hex(), signed, ok, err)
		}
	}
	signed, ok, err := signers.SignTxUnlocked(soft, txFor(soft), chainID)
	if !ok || err != nil {
		t.Fatalf("SignTxUnlocked(%s): ok %v, %v", soft.Hex(), ok, err)
	}
	if from, err := types.Sender(types.LatestSignerForChainID(chainID), signed); err != nil || from != soft {
		t.Fatalf("signed by %s, %v; want %s", from.Hex(), err, soft.Hex())
	}
	want, err := signers.SignTx(ctx, soft, txFor(soft), chainID)
	if err != nil {
		t.Fatal(err)
	}
	if signed.Hash() != want.Hash() {
		t.Fatalf("SignTxUnlocked's transaction %s differs from SignTx's %s", signed.Hash(), want.Hash())
	}
	blob := types.NewTx(&types.BlobTx{Nonce: 1, Gas: 21000})
	if _, ok, err := signers.SignTxUnlocked(soft, blob, chainID); !ok || err == nil {
		t.Fatalf("a blob transaction: ok %v, %v; want refused", ok, err)
	}
}
