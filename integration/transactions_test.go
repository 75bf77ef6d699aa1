package integration

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet"
)

// Dev accounts (the dev principal holds them; each test uses its own server and chain).
var (
	devAccount3 = common.HexToAddress("0xAEC01B2412A9E3cBf8D6269847e81CFEe4BeBFE2")
	devAccount4 = common.HexToAddress("0xcbaD0877D1A9b4513E508404488625c1f88dBedd")
	deadAddress = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
)

// devAuth are the dev credentials as header pairs.
var devAuth = []string{"X-API-Key", config.DevClientID, "Authorization", "Bearer " + config.DevToken}

func transfer(from common.Address, value int64) map[string]string {
	return map[string]string{
		"from": from.Hex(), "to": deadAddress.Hex(), "gas": "0x5208", "gasPrice": "0x3b9aca00",
		"value": hexutil.EncodeBig(big.NewInt(value)), "data": "0x",
	}
}

// waitMined waits until the chain has a receipt for every hash and returns their nonces.
func waitMined(t *testing.T, url string, hashes []common.Hash) []uint64 {
	t.Helper()
	nonces := make([]uint64, len(hashes))
	deadline := time.Now().Add(60 * time.Second)
	for i, h := range hashes {
		for {
			r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionReceipt", []any{h})
			if r.Error == nil && string(r.Result) != "null" && len(r.Result) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not mined within 60s", h.Hex())
			}
			time.Sleep(20 * time.Millisecond)
		}
		r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionByHash", []any{h})
		var tx struct{ Nonce hexutil.Uint64 }
		if err := json.Unmarshal(r.Result, &tx); err != nil {
			t.Fatalf("eth_getTransactionByHash %s: %s", h.Hex(), r.Result)
		}
		nonces[i] = uint64(tx.Nonce)
	}
	return nonces
}

// TestConcurrentSends500: 500 concurrent eth_sendTransaction from one account: 500 mined,
// nonces contiguous from the start value, no errors.
func TestConcurrentSends500(t *testing.T) {
	const n = 500
	cfg := strings.Replace(devConfig(t), "maxInFlight: 16", "maxInFlight: 1000", 1)
	if !strings.Contains(cfg, "maxInFlight: 1000") {
		t.Fatal("config.yaml changed: no maxInFlight")
	}
	ts := startServer(t, cfg)
	url := ts.API + "/v1/web3/mainnet"
	var start hexutil.Uint64
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionCount", []any{devAccount3, "pending"}); r.Error != nil || json.Unmarshal(r.Result, &start) != nil {
		t.Fatalf("eth_getTransactionCount: %+v", r)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
	// Its keep-alive connections are the test's, not the server's: closed before the
	// server stops (cleanups run after defers), so that the leak check sees none.
	defer client.CloseIdleConnections()
	hashes := make([]common.Hash, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rpcCall(t, client, url, "eth_sendTransaction", []any{transfer(devAccount3, int64(i+1))})
			if r.Error != nil || json.Unmarshal(r.Result, &hashes[i]) != nil {
				t.Errorf("send %d: HTTP %d %+v %s", i, r.Status, r.Error, r.Result)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	nonces := waitMined(t, url, hashes)
	slices.Sort(nonces)
	for i, got := range nonces {
		if want := uint64(start) + uint64(i); got != want {
			t.Fatalf("nonces not contiguous: sorted[%d] = %d, want %d", i, got, want)
		}
	}
	var count hexutil.Uint64
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionCount", []any{devAccount3, "latest"}); json.Unmarshal(r.Result, &count) != nil || uint64(count) != uint64(start)+n {
		t.Fatalf("account nonce %d after %d sends from %d", count, n, start)
	}
}

// signedNonce signs a transfer with eth_signTransaction and returns the signed nonce.
func signedNonce(t *testing.T, url string, from common.Address) uint64 {
	t.Helper()
	r := rpcCall(t, http.DefaultClient, url, "eth_signTransaction", []any{transfer(from, 1)})
	var raw hexutil.Bytes
	if r.Error != nil || json.Unmarshal(r.Result, &raw) != nil {
		t.Fatalf("eth_signTransaction: %d %+v %s", r.Status, r.Error, r.Result)
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	sender, err := types.Sender(types.LatestSignerForChainID(big.NewInt(1337)), &tx)
	if err != nil || sender != from || tx.ChainId().Uint64() != 1337 || !tx.Protected() {
		t.Fatalf("signed tx: sender %s (%v), chain %s, protected %v", sender.Hex(), err, tx.ChainId(), tx.Protected())
	}
	return tx.Nonce()
}

// TestRejectedRequestsConsumeNoNonce: every refused request leaves the nonce sequence as it
// was; the in-flight cap refuses the 17th held nonce with -32005 once inFlightWait passed
// (handed-out nonces stay in flight until used or expired).
func TestRejectedRequestsConsumeNoNonce(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "inFlightWait: 30s", "inFlightWait: 200ms", 1)
	if !strings.Contains(cfg, "inFlightWait: 200ms") {
		t.Fatal("config.yaml changed: no inFlightWait")
	}
	ts := startServer(t, cfg)
	url := ts.API + "/v1/web3/mainnet"
	first := signedNonce(t, url, devAccount4)
	bad := []map[string]string{
		func() map[string]string { m := transfer(devAccount4, 1); m["gas"] = "0x1"; return m }(),
		func() map[string]string { m := transfer(devAccount4, 1); m["nonce"] = "0x50"; return m }(),
		func() map[string]string { m := transfer(devAccount4, 1); m["nonce"] = "0x0"; return m }(),
		func() map[string]string { m := transfer(devAccount4, 1); m["gasPrice"] = "0x0"; return m }(),
		func() map[string]string {
			m := transfer(devAccount4, 1)
			m["value"] = "0xffffffffffffffffffffffffffffffffffffffffff"
			return m
		}(),
		func() map[string]string { m := transfer(devAccount4, 1); m["to"] = "0x1234"; return m }(),
	}
	for _, method := range []string{"eth_sendTransaction", "eth_signTransaction"} {
		for i, b := range bad {
			if r := rpcCall(t, http.DefaultClient, url, method, []any{b}); r.Error == nil {
				t.Fatalf("%s bad[%d] accepted: %s", method, i, r.Result)
			}
		}
	}
	if got := signedNonce(t, url, devAccount4); got != first+1 {
		t.Fatalf("after refused requests the next nonce is %d, want %d", got, first+1)
	}
	// Two held; 14 more fill the cap of 16 (handed-out nonces are in flight until used or
	// expired); the 17th is refused.
	for range 14 {
		signedNonce(t, url, devAccount4)
	}
	r := rpcCall(t, http.DefaultClient, url, "eth_signTransaction", []any{transfer(devAccount4, 1)})
	if r.Error == nil || r.Error.Code != -32005 || r.Status != http.StatusTooManyRequests {
		t.Fatalf("17th in flight: HTTP %d %+v", r.Status, r.Error)
	}
}

// TestIdempotencyKeyAndStatus: the same Idempotency-Key answers the same hash and sends one
// transaction; GET /v1/transactions/{hash} follows it to mined and confirmed.
func TestIdempotencyKeyAndStatus(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "    finalityDepth: 12\n", "    finalityDepth: 2\n", 1) // wallet.transactions
	if !strings.Contains(cfg, "    finalityDepth: 2\n") {
		t.Fatal("config.yaml changed: no wallet.transactions.finalityDepth")
	}
	ts := startServer(t, cfg)
	url := ts.API + "/v1/web3/mainnet"
	tx := transfer(devAccount3, 7)
	var hashes [3]common.Hash
	var wg sync.WaitGroup
	for i := range hashes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{tx}, "Idempotency-Key", "order-42")
			if r.Error != nil || json.Unmarshal(r.Result, &hashes[i]) != nil {
				t.Errorf("send %d: %+v", i, r.Error)
			}
		}()
	}
	wg.Wait()
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("one key, several hashes: %v", hashes)
	}
	// A different transaction under the same key is refused.
	if r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{transfer(devAccount3, 8)}, "Idempotency-Key", "order-42"); r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("key reused with another transaction: %+v", r)
	}
	waitMined(t, url, hashes[:1])
	var count hexutil.Uint64
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionCount", []any{devAccount3, "latest"}); json.Unmarshal(r.Result, &count) != nil || count != 1 {
		t.Fatalf("account nonce %d, want 1: the key sent more than one transaction", count)
	}
	// Blocks on top (other sends) confirm it.
	for i := range 3 {
		if r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{transfer(devAccount4, int64(i+1))}); r.Error != nil {
			t.Fatalf("send %d on top: %+v", i, r.Error)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := get(t, ts.API+"/v1/transactions/"+hashes[0].Hex(), devAuth...)
		var got struct {
			Transaction struct {
				State       string
				Nonce       uint64
				ChainID     uint64 `json:"chainId"`
				BlockNumber *uint64
			}
		}
		if status != 200 || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("status: %d %s", status, body)
		}
		tr := got.Transaction
		if tr.State == store.StateConfirmed {
			if tr.Nonce != 0 || tr.ChainID != 1337 || tr.BlockNumber == nil {
				t.Fatalf("confirmed transaction: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not confirmed within 30s: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIsolationBetweenPrincipals: principal bob holds a keystore account; dev and bob can
// neither sign with, send from, list nor query each other's accounts and transactions; no
// token, passphrase or key reaches the logs.
func TestIsolationBetweenPrincipals(t *testing.T) {
	const (
		passphrase = "isolation-test-passphrase-7f3a"
		bobToken   = "bob-secret-token-91c2"
	)
	t.Setenv(wallet.DefaultPassphraseEnv, passphrase)
	dir := t.TempDir()
	cfg := strings.Replace(devConfig(t), "lightScrypt: false", "lightScrypt: true", 1)
	cfg = strings.Replace(cfg, "level: warn", "level: debug", 1)
	cfg = strings.Replace(cfg, "      principal: dev\n", "      principal: dev\n    - sha256: "+sha256Hex(bobToken)+"\n      principal: bob\n", 1)
	if !strings.Contains(cfg, "principal: bob") {
		t.Fatal("config.yaml changed: no dev token entry to add bob after")
	}

	// Bob's account, made the way `web3gate accounts new --owner bob` does.
	parsed, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	setTestStore(t, &parsed.Store, dir)
	parsed.Wallet.Keys.Dir = filepath.Join(dir, "keystore")
	db, err := store.Open(context.Background(), parsed.Store, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := wallet.OpenKeys(parsed.Wallet.Keys, wallet.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := wallet.NewAccounts(keys, db).Create(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	var logs lockedLog
	ts := startServerIn(t, cfg, dir, &logs)
	url := ts.API + "/v1/web3/mainnet"
	asBob := []string{"X-API-Key", config.DevClientID, "Authorization", "Bearer " + bobToken}

	// dev funds bob; both send one transaction.
	var devHash, bobHash common.Hash
	if r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{map[string]string{
		"from": devAccount3.Hex(), "to": bob.Hex(), "gas": "0x5208", "gasPrice": "0x3b9aca00",
		"value": "0xde0b6b3a7640000", "data": "0x"}}); r.Error != nil || json.Unmarshal(r.Result, &devHash) != nil {
		t.Fatalf("dev funds bob: %+v", r.Error)
	}
	waitMined(t, url, []common.Hash{devHash})
	// The dev chain can serve the receipt a moment before "latest" is the block holding it
	// (a CI run saw bob's balance still 0): the funded check reads "latest".
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := rpcCall(t, http.DefaultClient, url, "eth_getBalance", []any{bob, "latest"})
		if r.Error == nil && string(r.Result) != `"0x0"` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's balance after the funding transaction was mined: %s %+v", r.Result, r.Error)
		}
	}
	if r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{transfer(bob, 1)}, asBob...); r.Error != nil || json.Unmarshal(r.Result, &bobHash) != nil {
		t.Fatalf("bob sends: %+v", r.Error)
	}

	notHeld := func(who string, r rpcResult) {
		t.Helper()
		if r.Status != 401 || r.Error == nil || r.Error.Code != 4100 || !strings.Contains(r.Error.Message, "Not Authorized") {
			t.Errorf("%s: HTTP %d %+v, want 4100/401", who, r.Status, r.Error)
		}
	}
	for _, m := range []string{"eth_sendTransaction", "eth_signTransaction"} {
		notHeld("dev "+m+" from bob's account", rpcCall(t, http.DefaultClient, url, m, []any{transfer(bob, 1)}))
		notHeld("bob "+m+" from dev's account", rpcCall(t, http.DefaultClient, url, m, []any{transfer(devAccount3, 1)}, asBob...))
	}
	notHeld("dev personal_sign with bob's account", rpcCall(t, http.DefaultClient, url, "personal_sign", []any{"0x68656c6c6f", bob.Hex()}))
	notHeld("bob personal_sign with dev's account", rpcCall(t, http.DefaultClient, url, "personal_sign", []any{"0x68656c6c6f", devAccount3.Hex()}, asBob...))

	var devList, bobList []common.Address
	json.Unmarshal(rpcCall(t, http.DefaultClient, url, "eth_accounts", []any{}).Result, &devList)
	json.Unmarshal(rpcCall(t, http.DefaultClient, url, "eth_accounts", []any{}, asBob...).Result, &bobList)
	if slices.Contains(devList, bob) || len(bobList) != 1 || bobList[0] != bob {
		t.Errorf("eth_accounts: dev %v, bob %v", devList, bobList)
	}

	if code, _ := get(t, ts.API+"/v1/transactions/"+devHash.Hex(), asBob...); code != 404 {
		t.Errorf("bob reads dev's transaction: HTTP %d, want 404", code)
	}
	if code, _ := get(t, ts.API+"/v1/transactions/"+bobHash.Hex(), devAuth...); code != 404 {
		t.Errorf("dev reads bob's transaction: HTTP %d, want 404", code)
	}
	if code, body := get(t, ts.API+"/v1/transactions/"+bobHash.Hex(), asBob...); code != 200 {
		t.Errorf("bob reads his own transaction: HTTP %d %s", code, body)
	}
	ts.stop()

	out := logs.String()
	if !strings.Contains(out, `"level":"debug"`) && !strings.Contains(out, "serving") {
		t.Fatalf("no logs captured:\n%s", out)
	}
	secrets := map[string]string{"passphrase": passphrase, "bob's token": bobToken, "dev token": config.DevToken}
	for name, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the %s reached the logs", name)
		}
	}
	for _, k := range devKeysHex(t) {
		if strings.Contains(strings.ToLower(out), k) {
			t.Error("a dev private key reached the logs")
		}
	}
}

// lockedLog is a goroutine-safe log sink.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// devKeysHex are the dev accounts' private keys, lowercase hex without 0x (see devchain).
func devKeysHex(t *testing.T) []string {
	t.Helper()
	var out []string
	for i := range 10 {
		out = append(out, hex.EncodeToString(crypto.Keccak256([]byte(fmt.Sprintf("web3gate dev account %d", i)))))
	}
	return out
}

// TestFilledSendsAndStatus: what ethers and viem send ({from, to, value}; a creation with only
// data) is filled, mined, and the status object says what was filled and, for a creation,
// where the contract is; a client nonce equal to eth_getTransactionCount "pending" is taken.
func TestFilledSendsAndStatus(t *testing.T) {
	ts := startServer(t, devConfig(t))
	url := ts.API + "/v1/web3/mainnet"
	send := func(tx map[string]any) common.Hash {
		t.Helper()
		r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{tx})
		var h common.Hash
		if r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
			t.Fatalf("eth_sendTransaction %v: HTTP %d %+v", tx, r.Status, r.Error)
		}
		return h
	}
	transferHash := send(map[string]any{"from": devAccount3, "to": deadAddress, "value": "0x1"})
	// init code returning one byte of runtime code (0x00): PUSH1 1 PUSH1 12 PUSH1 0 CODECOPY
	// PUSH1 1 PUSH1 0 RETURN, then the runtime.
	createHash := send(map[string]any{"from": devAccount3, "data": "0x6001600c60003960016000f300"})
	var pending hexutil.Uint64
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionCount", []any{devAccount3, "pending"}); r.Error != nil || json.Unmarshal(r.Result, &pending) != nil {
		t.Fatalf("eth_getTransactionCount: %+v", r)
	}
	nonceHash := send(map[string]any{"from": devAccount3, "to": deadAddress, "nonce": pending, "gas": "0x5208",
		"maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x1", "value": "0x0", "data": "0x"})
	nonces := waitMined(t, url, []common.Hash{transferHash, createHash, nonceHash})
	if nonces[2] != uint64(pending) || nonces[1]+1 != nonces[2] || nonces[0]+1 != nonces[1] {
		t.Fatalf("nonces %v, the client's %d", nonces, pending)
	}
	var receipt struct {
		Status          hexutil.Uint64  `json:"status"`
		ContractAddress *common.Address `json:"contractAddress"`
	}
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionReceipt", []any{createHash}); json.Unmarshal(r.Result, &receipt) != nil ||
		receipt.Status != 1 || receipt.ContractAddress == nil {
		t.Fatalf("creation receipt: %s", r.Result)
	}
	if r := rpcCall(t, http.DefaultClient, url, "eth_getCode", []any{receipt.ContractAddress, "latest"}); string(r.Result) != `"0x00"` {
		t.Fatalf("code at %s: %s", receipt.ContractAddress.Hex(), r.Result)
	}
	for _, tc := range []struct {
		hash     common.Hash
		filled   []string
		contract *common.Address
	}{
		{transferHash, []string{"gas", "maxFeePerGas", "maxPriorityFeePerGas", "data"}, nil},
		{createHash, []string{"gas", "maxFeePerGas", "maxPriorityFeePerGas", "value"}, receipt.ContractAddress},
		{nonceHash, []string{}, nil},
	} {
		_, body := get(t, ts.API+"/v1/transactions/"+tc.hash.Hex(), devAuth...)
		var st struct {
			Transaction struct {
				Filled          []string        `json:"filled"`
				ContractAddress *common.Address `json:"contractAddress"`
				To              *common.Address `json:"to"`
			} `json:"transaction"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || !slices.Equal(st.Transaction.Filled, tc.filled) ||
			(tc.contract == nil) != (st.Transaction.ContractAddress == nil) ||
			tc.contract != nil && (*st.Transaction.ContractAddress != *tc.contract || st.Transaction.To != nil) {
			t.Fatalf("status of %s: %s (want filled %v, contract %v)", tc.hash.Hex(), body, tc.filled, tc.contract)
		}
	}
}

// TestBurstWaitsForSlots: 100 concurrent sends from one account with the shipped limits
// (maxInFlight 16): every one is answered with a hash and mined, the ones beyond the cap
// after waiting for a slot.
func TestBurstWaitsForSlots(t *testing.T) {
	const n = 100
	ts := startServer(t, devConfig(t))
	url := ts.API + "/v1/web3/mainnet"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
	defer client.CloseIdleConnections()
	hashes := make([]common.Hash, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rpcCall(t, client, url, "eth_sendTransaction", []any{map[string]any{"from": devAccount4, "to": deadAddress, "value": hexutil.EncodeUint64(uint64(i + 1))}})
			if r.Error != nil || json.Unmarshal(r.Result, &hashes[i]) != nil {
				t.Errorf("send %d: HTTP %d %+v", i, r.Status, r.Error)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	nonces := waitMined(t, url, hashes)
	slices.Sort(nonces)
	for i, got := range nonces {
		if got != nonces[0]+uint64(i) {
			t.Fatalf("nonces not contiguous: %v", nonces)
		}
	}
}

// TestPendingCountFromNonceState: eth_getTransactionCount "pending" of a held account counts
// the nonces web3gate handed out that no node knows of yet (eth_signTransaction), so a client
// that reads it and sends it is accepted; "latest" and accounts web3gate does not hold are
// the node's.
func TestPendingCountFromNonceState(t *testing.T) {
	ts := startServer(t, devConfig(t))
	url := ts.API + "/v1/web3/mainnet"
	count := func(addr common.Address, tag string) uint64 {
		t.Helper()
		var n hexutil.Uint64
		if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionCount", []any{addr, tag}); r.Error != nil || json.Unmarshal(r.Result, &n) != nil {
			t.Fatalf("eth_getTransactionCount %s %s: %+v %s", addr.Hex(), tag, r.Error, r.Result)
		}
		return uint64(n)
	}
	first := signedNonce(t, url, devAccount4)
	second := signedNonce(t, url, devAccount4)
	if got := count(devAccount4, "pending"); got != second+1 || second != first+1 {
		t.Fatalf("pending %d after handing out %d and %d", got, first, second)
	}
	if got := count(devAccount4, "latest"); got != first {
		t.Fatalf("latest %d: the node's, before any submission (want %d)", got, first)
	}
	stranger := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	if got := count(stranger, "pending"); got != 0 {
		t.Fatalf("pending of an account not held: %d", got)
	}
	tx := transfer(devAccount4, 1)
	tx["nonce"] = hexutil.EncodeUint64(second + 1)
	r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{tx})
	if r.Error != nil {
		t.Fatalf("send with the pending count as nonce: %+v", r.Error)
	}
}
