package integration

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/testproc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/pkcs11"
	"github.com/web3gate/web3gate/wallet/pkcs11/softhsmtest"
)

// startWithHardwareAccounts records, before starting web3gate with cfg, one account of the
// dev principal generated in the backend b and, with withImport, one imported onto it (the
// imported key returned); b is closed then. web3gate's logs are shown if the test fails.
func startWithHardwareAccounts(t *testing.T, cfg *config.Config, b wallet.KeyBackend, withImport bool) (ts *testServer, gen, imp common.Address, key *ecdsa.PrivateKey) {
	t.Helper()
	gen, imp, key = hardwareAccounts(t, cfg, b, withImport)
	b.Close()
	var logs testproc.Buffer
	ts = startConfig(t, cfg, &logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("web3gate logs:\n%s", logs.String())
		}
	})
	return ts, gen, imp, key
}

// hardwareAccounts records one account of the dev principal generated in b and, with
// withImport, one imported onto it.
func hardwareAccounts(t *testing.T, cfg *config.Config, b wallet.KeyBackend, withImport bool) (gen, imp common.Address, key *ecdsa.PrivateKey) {
	t.Helper()
	const owner = "dev"
	ctx := context.Background()
	db, err := store.Open(ctx, cfg.Store, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	accts := wallet.NewAccountsOf(wallet.NewSigners(wallet.MemoryKeys(wallet.Deps{}), wallet.SignersDeps{Store: db, Backends: []wallet.KeyBackend{b}}), db)
	if gen, err = accts.CreateIn(ctx, b, owner, "generated"); err != nil {
		t.Fatal(err)
	}
	if !withImport {
		return gen, common.Address{}, nil
	}
	if key, err = crypto.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if imp, err = accts.ImportIn(ctx, b, owner, key, "imported"); err != nil {
		t.Fatal(err)
	}
	return gen, imp, key
}

// TestHSMAccountsSignEverything: on the dev chain, accounts whose keys are on a SoftHSM2
// token (one generated there, one imported) send complete and filled transactions, sign
// with eth_signTransaction, personal_sign, eth_sign and eth_signTypedData_v4, every
// signature recovering to the account; the imported key's bytes are nowhere in the server's
// files or the token's; the signatures are counted under backend pkcs11.
func TestHSMAccountsSignEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, devConfig(t), dir)
	cfg.Wallet.PKCS11 = softhsmtest.Token(t)
	b, err := pkcs11.New(cfg.Wallet.PKCS11, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, gen, imp, key := startWithHardwareAccounts(t, cfg, b, true)
	url := ts.API + "/v1/web3/mainnet"

	call := func(method string, params ...any) json.RawMessage {
		t.Helper()
		r := rpcCall(t, http.DefaultClient, url, method, params, devAuth...)
		if r.Error != nil {
			t.Fatalf("%s: HTTP %d %+v", method, r.Status, r.Error)
		}
		return r.Result
	}
	recoverTo := func(what string, hash []byte, raw json.RawMessage, want common.Address) {
		t.Helper()
		var sig hexutil.Bytes
		if json.Unmarshal(raw, &sig) != nil || len(sig) != 65 || (sig[64] != 27 && sig[64] != 28) {
			t.Fatalf("%s: %s, want a 65-byte signature with V 27 or 28", what, raw)
		}
		sig[64] -= 27
		if err := wallet.VerifySignature(hash, sig, want); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Funds from a dev account, then from each hardware account a complete object and the
	// {from, to, value} a wallet sends, all mined, sent by the account.
	var hashes []common.Hash
	for _, to := range []common.Address{gen, imp} {
		var h common.Hash
		json.Unmarshal(call("eth_sendTransaction", map[string]string{"from": devAccount3.Hex(), "to": to.Hex(), "value": "0xde0b6b3a7640000"}), &h)
		hashes = append(hashes, h)
	}
	waitMined(t, url, hashes)
	hashes = nil
	for _, from := range []common.Address{gen, imp} {
		for _, obj := range []map[string]string{transfer(from, 7), {"from": from.Hex(), "to": deadAddress.Hex(), "value": "0x9"}} {
			var h common.Hash
			if err := json.Unmarshal(call("eth_sendTransaction", obj), &h); err != nil {
				t.Fatal(err)
			}
			hashes = append(hashes, h)
		}
	}
	waitMined(t, url, hashes)
	for i, h := range hashes {
		var rc struct {
			From   common.Address
			Status hexutil.Uint64
		}
		json.Unmarshal(call("eth_getTransactionReceipt", h), &rc)
		if want := []common.Address{gen, imp}[i/2]; rc.From != want || rc.Status != 1 {
			t.Fatalf("receipt of %s: from %s status %d, want from %s status 1", h.Hex(), rc.From.Hex(), rc.Status, want.Hex())
		}
	}

	for _, addr := range []common.Address{gen, imp} {
		var raw hexutil.Bytes
		json.Unmarshal(call("eth_signTransaction", transfer(addr, 1)), &raw)
		var tx types.Transaction
		if err := tx.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		if from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(1337)), &tx); err != nil || from != addr {
			t.Fatalf("eth_signTransaction as %s: signed by %s (%v)", addr.Hex(), from.Hex(), err)
		}
		msg := []byte("hello from the token")
		recoverTo("personal_sign", accounts.TextHash(msg), call("personal_sign", hexutil.Encode(msg), addr.Hex()), addr)
		recoverTo("eth_sign", accounts.TextHash(msg), call("eth_sign", addr.Hex(), hexutil.Encode(msg)), addr)
		td := greeting()
		hash, _, err := apitypes.TypedDataAndHash(td)
		if err != nil {
			t.Fatal(err)
		}
		recoverTo("eth_signTypedData_v4", hash, call("eth_signTypedData_v4", addr.Hex(), td), addr)
	}

	var accts []common.Address
	json.Unmarshal(call("eth_accounts"), &accts)
	for _, want := range []common.Address{gen, imp} {
		if !slices.Contains(accts, want) {
			t.Errorf("eth_accounts %v lacks the hardware account %s", accts, want.Hex())
		}
	}
	if n := metric(t, ts.Admin, `web3gate_sign_duration_seconds_count{backend="pkcs11"}`); n < 12 {
		t.Errorf("web3gate_sign_duration_seconds_count{backend=pkcs11} = %v, want >= 12", n)
	}
	if n := metric(t, ts.Admin, `web3gate_sign_errors_total{backend="pkcs11",reason="bad_signature"}`); n != 0 {
		t.Errorf("bad signatures: %v", n)
	}
	ts.stop()
	softhsmtest.AssertNoKeyBytes(t, dir, crypto.FromECDSA(key))
	softhsmtest.AssertNoKeyBytes(t, softhsmtest.TokenDir(t), crypto.FromECDSA(key))
	if files, _ := filepath.Glob(filepath.Join(dir, "keystore", "*")); len(files) != 0 {
		t.Errorf("the keystore holds %v; the hardware accounts have no key file", files)
	}
}
