package integration

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/store"
)

// revertContract is the creation code of a contract every call of which reverts with
// Error("web3gate test revert"): the runtime stores the selector 0x08c379a0, the offset 0x20,
// the length 20 and the text, and reverts with those 100 bytes.
func revertContract() string {
	text := []byte("web3gate test revert")
	word := make([]byte, 32)
	copy(word, text)
	runtime := "6308c379a060e01b600052" + // mstore(0, 0x08c379a0 << 224)
		"6020600452" + // mstore(4, 0x20)
		"6014602452" + // mstore(0x24, 20)
		"7f" + hex.EncodeToString(word) + "604452" + // mstore(0x44, text)
		"60646000fd" // revert(0, 100)
	n := len(runtime) / 2
	// codecopy(0, 12, n); return(0, n): the creation code is 12 bytes.
	return "0x60" + hex.EncodeToString([]byte{byte(n)}) + "600c60003960" + hex.EncodeToString([]byte{byte(n)}) + "6000f3" + runtime
}

// txStatus is GET /v1/transactions/{hash}'s transaction.
type txStatus struct {
	State       string
	Nonce       uint64
	BlockNumber *uint64
	BlockHash   *common.Hash
	MinedHash   *common.Hash
	Error       *string
}

func transactionStatus(t *testing.T, ts *testServer, h common.Hash) txStatus {
	t.Helper()
	status, body := get(t, ts.API+"/v1/transactions/"+h.Hex(), devAuth...)
	var got struct{ Transaction txStatus }
	if status != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("status of %s: %d %s", h.Hex(), status, body)
	}
	return got.Transaction
}

// waitState waits until the transaction with hash h is in state want.
func waitState(t *testing.T, ts *testServer, h common.Hash, want string) txStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := transactionStatus(t, ts, h)
		if s.State == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s after 30s, want %s (error %v)", h.Hex(), s.State, want, s.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sendTx(t *testing.T, url string, tx map[string]string, headers ...string) common.Hash {
	t.Helper()
	var h common.Hash
	r := rpcCall(t, http.DefaultClient, url, "eth_sendTransaction", []any{tx}, headers...)
	if r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
		t.Fatalf("eth_sendTransaction %v: %+v %s", tx, r.Error, r.Result)
	}
	return h
}

// TestRevertedSendFails: a send mined with receipt status 0 becomes failed with the revert
// reason the contract gave, keeps its block, stays failed when its block is confirmed, and
// uses its nonce: the account's next send is mined at the next nonce, without a filler, and
// nothing of the account is left in flight. WEB3GATE_TEST_STORE=postgres runs it on
// PostgreSQL.
func TestRevertedSendFails(t *testing.T) {
	cfg := strings.Replace(devConfig(t), "    finalityDepth: 12\n", "    finalityDepth: 2\n", 1) // wallet.transactions
	if !strings.Contains(cfg, "    finalityDepth: 2\n") {
		t.Fatal("config.yaml changed: no wallet.transactions.finalityDepth")
	}
	dir := t.TempDir()
	logs := &lockedLog{}
	ts := startServerIn(t, cfg, dir, logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	url := ts.API + "/v1/web3/mainnet"

	deploy := sendTx(t, url, map[string]string{"from": devAccount3.Hex(), "data": revertContract(), "gas": "0x30000", "gasPrice": "0x3b9aca00"})
	waitMined(t, url, []common.Hash{deploy})
	var rc struct {
		Status          hexutil.Uint64
		ContractAddress *common.Address
	}
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionReceipt", []any{deploy}); r.Error != nil || json.Unmarshal(r.Result, &rc) != nil || rc.Status != 1 || rc.ContractAddress == nil {
		t.Fatalf("deploy receipt: %+v %s", r.Error, r.Result)
	}
	// The estimate would refuse a call that reverts: the gas is given.
	call := map[string]string{"from": devAccount3.Hex(), "to": rc.ContractAddress.Hex(), "gas": "0x20000", "gasPrice": "0x3b9aca00", "value": "0x0", "data": "0x12345678"}
	reverted := sendTx(t, url, call, "Idempotency-Key", "revert-1")
	waitMined(t, url, []common.Hash{reverted})
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionReceipt", []any{reverted}); r.Error != nil || json.Unmarshal(r.Result, &rc) != nil || rc.Status != 0 {
		t.Fatalf("the call did not revert on chain: %+v %s", r.Error, r.Result)
	}
	got := waitState(t, ts, reverted, store.StateFailed)
	if got.Error == nil || *got.Error != "execution reverted: web3gate test revert" {
		t.Fatalf("reverted transaction's error: %v", got.Error)
	}
	if got.BlockNumber == nil || got.BlockHash == nil || got.MinedHash == nil || *got.MinedHash != reverted {
		t.Fatalf("reverted transaction lost its block: %+v", got)
	}
	// It was sent: the request repeated with its Idempotency-Key gets its hash, nothing new
	// is sent (the account's nonce is checked below).
	if again := sendTx(t, url, call, "Idempotency-Key", "revert-1"); again != reverted {
		t.Fatalf("repeated request: %s, want %s", again.Hex(), reverted.Hex())
	}

	// Its nonce is used: the next send takes the next one, and no filler is sent.
	next := sendTx(t, url, transfer(devAccount3, 1))
	nonces := waitMined(t, url, []common.Hash{reverted, next})
	if nonces[1] != nonces[0]+1 {
		t.Fatalf("nonces %v: the send after the reverted one is not at the next nonce", nonces)
	}
	// Blocks on top confirm them; the reverted one stays failed.
	for i := range 3 {
		sendTx(t, url, transfer(devAccount4, int64(i+1)))
	}
	waitState(t, ts, next, store.StateConfirmed)
	if s := transactionStatus(t, ts, reverted); s.State != store.StateFailed || s.Error == nil || s.BlockNumber == nil || *s.BlockNumber != *got.BlockNumber {
		t.Fatalf("after confirmations the reverted transaction is %+v", s)
	}
	var count hexutil.Uint64
	if r := rpcCall(t, http.DefaultClient, url, "eth_getTransactionCount", []any{devAccount3, "latest"}); json.Unmarshal(r.Result, &count) != nil || uint64(count) != nonces[1]+1 {
		t.Fatalf("account nonce %d, want %d: a transaction beyond deploy, revert and transfer was sent", count, nonces[1]+1)
	}

	ts.stop()
	db := openTestStore(t, dir)
	ctx := context.Background()
	if err := db.Read(ctx, func(tx *store.DBTx) error {
		n, cost, err := tx.InFlight(ctx, 1337, devAccount3)
		if err != nil {
			return err
		}
		if n != 0 || cost.Sign() != 0 {
			t.Errorf("in flight after the reverted send: %d, cost %s", n, cost)
		}
		rows, err := tx.TxsAtNonce(ctx, 1337, devAccount3, nonces[0])
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0].Kind != store.KindSend || rows[0].State != store.StateFailed {
			t.Errorf("rows at the reverted nonce: %d (want the reverted send only)", len(rows))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
