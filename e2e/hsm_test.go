package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/wallet/pkcs11"
	"github.com/web3gate/web3gate/wallet/pkcs11/softhsmtest"
)

// Accounts whose keys live on a PKCS#11 token (SoftHSM2) behind the real binary: made with
// `web3gate accounts new|import --backend pkcs11`, they send, sign and get bumped on anvil,
// and every signature recovers to the account.

// pkcs11Section is the wallet.pkcs11 section (indented under wallet:) of a backend on tok.
// The PIN comes from tok's PIN file: tok's pinEnv stays unset (softhsmtest.PINEnv).
func pkcs11Section(tok pkcs11.Config, sessions int) string {
	return fmt.Sprintf("  pkcs11: {module: %q, tokenLabel: %q, pinEnv: %s, pinFile: %q, sessions: %d, signTimeout: 5s}\n",
		tok.Module, tok.TokenLabel, tok.PINEnv, tok.PINFile, sessions)
}

// runCLISplit runs the binary with args and returns its standard output, standard error and
// exit code; the test fails if one of secrets (without case) appears in either.
func runCLISplit(t *testing.T, secrets []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	for _, s := range secrets {
		if strings.Contains(strings.ToLower(out.String()+errOut.String()), strings.ToLower(s)) {
			t.Fatalf("a secret appeared in the output of %q", args)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// tokenPIN is the user PIN of tok, from its PIN file: a secret no output may show.
func tokenPIN(t *testing.T, tok pkcs11.Config) string {
	t.Helper()
	b, err := os.ReadFile(tok.PINFile)
	if err != nil {
		t.Fatal(err)
	}
	pin := strings.TrimSpace(string(b))
	if pin == "" {
		t.Fatalf("empty PIN file %s", tok.PINFile)
	}
	return pin
}

// newHSMAccount makes a key on the token tok (configured at cfgPath) for principal e2e with
// `web3gate accounts new --backend pkcs11` and returns its address.
func newHSMAccount(t *testing.T, tok pkcs11.Config, cfgPath, label string) common.Address {
	t.Helper()
	out, errOut, code := runCLISplit(t, []string{tokenPIN(t, tok)}, "accounts", "new", "--backend", "pkcs11", "--owner", "e2e", "--label", label, "--config", cfgPath)
	addr := addressRE.FindString(out)
	if code != 0 || addr == "" {
		t.Fatalf("accounts new --backend pkcs11: exit %d\n%s%s", code, out, errOut)
	}
	return common.HexToAddress(addr)
}

// checkBackends checks that `accounts list` shows each of accts with backend pkcs11.
func checkBackends(t *testing.T, cfgPath string, accts ...common.Address) {
	t.Helper()
	out, errOut, code := runCLISplit(t, nil, "accounts", "list", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("accounts list: exit %d\n%s%s", code, out, errOut)
	}
	for _, a := range accts {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == a.Hex() {
				found = true
				if f[1] != "e2e" || f[2] != "pkcs11" {
					t.Errorf("accounts list: %s: owner %s, backend %s; want e2e, pkcs11", a.Hex(), f[1], f[2])
				}
			}
		}
		if !found {
			t.Errorf("accounts list lacks %s:\n%s", a.Hex(), out)
		}
	}
}

// sendObj is eth_sendTransaction of obj; it returns the hash.
func sendObj(t *testing.T, g *gateway, obj map[string]any) common.Hash {
	t.Helper()
	code, r, err := call(g.API+"/v1/web3/mainnet", "eth_sendTransaction", obj)
	var h common.Hash
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
		t.Fatalf("eth_sendTransaction %v: HTTP %d, %v, %v", obj, code, r, err)
	}
	return h
}

// signed calls method with params and returns its 65-byte signature with V lowered to 0/1.
func signed(t *testing.T, g *gateway, method string, params ...any) []byte {
	t.Helper()
	code, r, err := call(g.API+"/v1/web3/mainnet", method, params...)
	var sig hexutil.Bytes
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &sig) != nil || len(sig) != 65 {
		t.Fatalf("%s: HTTP %d, %v, %v", method, code, r, err)
	}
	if sig[64] != 27 && sig[64] != 28 {
		t.Fatalf("%s: V = %d, want 27 or 28", method, sig[64])
	}
	sig[64] -= 27
	return sig
}

// recovered is the address that signed hash with sig (V 0/1).
func recovered(t *testing.T, hash, sig []byte) common.Address {
	t.Helper()
	pub, err := crypto.SigToPub(hash, sig)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	return crypto.PubkeyToAddress(*pub)
}

// minedSender is the sender recovered from the signature of the transaction hash as mined on
// node (its raw bytes), checked against the receipt's sender and status.
func minedSender(t *testing.T, node *anvil.Node, hash common.Hash) common.Address {
	t.Helper()
	rc := waitReceipt(t, node, hash.Hex())
	res, err := node.Call("eth_getRawTransactionByHash", hash.Hex())
	var raw hexutil.Bytes
	if err != nil || json.Unmarshal(res, &raw) != nil {
		t.Fatalf("eth_getRawTransactionByHash %s: %v: %s", hash.Hex(), err, res)
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatalf("the mined transaction %s: %v", hash.Hex(), err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
	if err != nil {
		t.Fatalf("the mined transaction %s: %v", hash.Hex(), err)
	}
	if rc.Status != "0x1" || !strings.EqualFold(rc.From, from.Hex()) {
		t.Fatalf("receipt of %s: status %s from %s; the signature recovers to %s", hash.Hex(), rc.Status, rc.From, from.Hex())
	}
	return from
}

// TestHSMAccountOnAnvil: an account generated on a SoftHSM2 token and one imported onto it
// (its key file deleted) send complete and filled transactions, sign a transaction, a
// message (personal_sign, eth_sign) and typed data, and get a send bumped past a base-fee
// spike, on anvil mining when told; every signature recovers to the account, and the
// imported key's bytes are in no file of the data directory or the token directory.
func TestHSMAccountOnAnvil(t *testing.T) {
	const chainID = 31337
	tok := softhsmtest.Token(t)
	node := anvil.Start(t, chainID, "--no-mining")
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	dir := t.TempDir()
	cfg := bumpConfig(dir, "", chainID, "{pollInterval: 100ms, rebroadcastAfter: 2s, bump: {after: 2, percent: 12.5}}", node.URL) +
		pkcs11Section(tok, 4)
	cfgPath := writeConfig(t, dir, cfg)

	// One key generated on the token, one imported onto it from a raw key file.
	acct := newHSMAccount(t, tok, cfgPath, "e2e generated")
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyHex := hexKey(priv)
	imported := crypto.PubkeyToAddress(priv.PublicKey)
	keyFile := filepath.Join(dir, "imported-key.txt")
	if err := os.WriteFile(keyFile, []byte("0x"+keyHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLISplit(t, []string{keyHex, tokenPIN(t, tok)}, "accounts", "import", "--backend", "pkcs11", "--owner", "e2e",
		"--private-key-file", keyFile, "--config", cfgPath)
	if code != 0 || !strings.Contains(out, imported.Hex()) {
		t.Fatalf("accounts import --backend pkcs11: exit %d, want 0 and %s\n%s%s", code, imported.Hex(), out, errOut)
	}
	if !strings.Contains(errOut, "DELETED "+keyFile) {
		t.Errorf("accounts import --backend pkcs11: standard error does not say DELETED %s:\n%s", keyFile, errOut)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Errorf("the imported key file is still there (%v)", err)
	}
	checkBackends(t, cfgPath, acct, imported)

	g := startGateway(t, cfg)
	waitReady(t, g)
	fund(t, node, acct)
	fund(t, node, imported)

	// A complete object and a filled one ({from, to, value}), and the imported key's send.
	complete := sendObj(t, g, txObject(acct, true, nil))
	filled := sendObj(t, g, map[string]any{"from": acct.Hex(), "to": recipient.Hex(), "value": "0x2"})
	fromImported := sendObj(t, g, map[string]any{"from": imported.Hex(), "to": recipient.Hex(), "value": "0x3"})
	mine(t, node)
	for name, h := range map[string]common.Hash{"complete": complete, "filled": filled} {
		if from := minedSender(t, node, h); from != acct {
			t.Errorf("%s send %s mined from %s, want %s", name, h.Hex(), from.Hex(), acct.Hex())
		}
	}
	if from := minedSender(t, node, fromImported); from != imported {
		t.Errorf("the imported key's send mined from %s, want %s", from.Hex(), imported.Hex())
	}

	// eth_signTransaction: the caller gets the bytes, submits them, and they are mined.
	code, r, err := call(g.API+"/v1/web3/mainnet", "eth_signTransaction", txObject(acct, true, nil))
	var raw hexutil.Bytes
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &raw) != nil {
		t.Fatalf("eth_signTransaction: HTTP %d, %v, %v", code, r, err)
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatalf("eth_signTransaction's transaction: %v", err)
	}
	if from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(chainID)), tx); err != nil || from != acct {
		t.Fatalf("eth_signTransaction's transaction is signed by %s (%v), want %s", from.Hex(), err, acct.Hex())
	}
	if _, err := node.Call("eth_sendRawTransaction", raw.String()); err != nil && !strings.Contains(err.Error(), "already") {
		t.Fatalf("eth_sendRawTransaction of the signed transaction: %v", err)
	}
	mine(t, node)
	if from := minedSender(t, node, tx.Hash()); from != acct {
		t.Errorf("the signed transaction mined from %s", from.Hex())
	}

	// personal_sign, eth_sign and eth_signTypedData_v4.
	msg := []byte("web3gate on a PKCS#11 token")
	if got := recovered(t, accounts.TextHash(msg), signed(t, g, "personal_sign", hexutil.Encode(msg), acct.Hex())); got != acct {
		t.Errorf("personal_sign recovers to %s, want %s", got.Hex(), acct.Hex())
	}
	if got := recovered(t, accounts.TextHash(msg), signed(t, g, "eth_sign", acct.Hex(), hexutil.Encode(msg))); got != acct {
		t.Errorf("eth_sign recovers to %s, want %s", got.Hex(), acct.Hex())
	}
	if got := recovered(t, accounts.TextHash(msg), signed(t, g, "personal_sign", hexutil.Encode(msg), imported.Hex())); got != imported {
		t.Errorf("personal_sign by the imported key recovers to %s, want %s", got.Hex(), imported.Hex())
	}
	td := apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {{Name: "name", Type: "string"}, {Name: "chainId", Type: "uint256"}},
			"Custody":      {{Name: "holder", Type: "address"}, {Name: "note", Type: "string"}},
		},
		PrimaryType: "Custody",
		Domain:      apitypes.TypedDataDomain{Name: "web3gate", ChainId: (*math.HexOrDecimal256)(big.NewInt(chainID))},
		Message:     apitypes.TypedDataMessage{"holder": acct.Hex(), "note": "key in hardware"},
	}
	tdHash, _, err := apitypes.TypedDataAndHash(td)
	if err != nil {
		t.Fatal(err)
	}
	if got := recovered(t, tdHash, signed(t, g, "eth_signTypedData_v4", acct.Hex(), td)); got != acct {
		t.Errorf("eth_signTypedData_v4 recovers to %s, want %s", got.Hex(), acct.Hex())
	}

	// A fee bump: the send priced out by a base-fee spike is re-signed on the token and mined.
	first := send(t, g, acct)
	orig := status(t, g, first)
	setBaseFee(t, node, 50*gwei)
	mine(t, node)
	if rc := receiptOf(t, node, first.Hex()); rc != nil {
		t.Fatalf("the send was mined at a base fee of 50 gwei (fee cap %v)", orig.Versions[0].MaxFeePerGas)
	}
	took := mineUntil(t, node, 30*time.Second, "mined after a bump", func() bool { return settled(status(t, g, first)) })
	s := status(t, g, first)
	if len(s.Versions) < 2 || s.Versions[0].Hash != first || s.Versions[0].State != "replaced" ||
		s.MinedHash == nil || *s.MinedHash == first {
		t.Fatalf("after the bump: %+v", s)
	}
	for _, v := range s.Versions[1:] {
		if v.Kind != "bump" {
			t.Errorf("version %s is a %s, want a bump", v.Hash.Hex(), v.Kind)
		}
	}
	if from := minedSender(t, node, *s.MinedHash); from != acct {
		t.Fatalf("the bump %s mined from %s, want %s", s.MinedHash.Hex(), from.Hex(), acct.Hex())
	}
	t.Logf("bumped %d times, mined %v after the spike", len(s.Versions)-1, took.Round(10*time.Millisecond))

	if n := metricSum(t, g, "web3gate_sign_duration_seconds_count", `backend="pkcs11"`); n <= 0 {
		t.Errorf(`web3gate_sign_duration_seconds_count{backend="pkcs11"} = %v, want > 0: %q`, n, metric(t, g, "web3gate_sign_duration_seconds_count"))
	}
	if logs := strings.ToLower(g.logs.String()); strings.Contains(logs, keyHex) || strings.Contains(logs, strings.ToLower(tokenPIN(t, tok))) {
		t.Error("the imported key or the token's PIN appeared in the gateway's logs")
	}

	// The imported key is in no file: the store, the keystore folder, the config, the token.
	_ = g.stop(t, 20*time.Second) // the store and the token flushed and closed
	softhsmtest.AssertNoKeyBytes(t, dir, crypto.FromECDSA(priv))
	softhsmtest.AssertNoKeyBytes(t, softhsmtest.TokenDir(t), crypto.FromECDSA(priv))
}
