package e2e

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// revertCreation is the creation code of a contract every call of which reverts with
// Error("web3gate test revert") (the same as the root package's revert_test.go).
func revertCreation() string {
	word := make([]byte, 32)
	copy(word, "web3gate test revert")
	runtime := "6308c379a060e01b600052" + "6020600452" + "6014602452" + "7f" + hex.EncodeToString(word) + "604452" + "60646000fd"
	n := hex.EncodeToString([]byte{byte(len(runtime) / 2)})
	return "0x60" + n + "600c600039" + "60" + n + "6000f3" + runtime
}

// revertStatus is GET /v1/transactions/{hash}'s transaction, in part.
type revertStatus struct {
	State       string       `json:"state"`
	Nonce       uint64       `json:"nonce"`
	Error       *string      `json:"error"`
	BlockNumber *uint64      `json:"blockNumber"`
	MinedHash   *common.Hash `json:"minedHash"`
}

func revertStatusOf(t *testing.T, g *gateway, hash common.Hash) revertStatus {
	t.Helper()
	code, b := rest(t, http.MethodGet, g.API+"/v1/transactions/"+hash.Hex(), "e2e-token", "")
	var out struct {
		Transaction revertStatus `json:"transaction"`
	}
	if code != 200 || json.Unmarshal(b, &out) != nil {
		t.Fatalf("GET /v1/transactions/%s: %d %s", hash.Hex(), code, b)
	}
	return out.Transaction
}

func sendObject(t *testing.T, g *gateway, obj map[string]any) common.Hash {
	t.Helper()
	code, r, err := call(g.API+"/v1/web3/mainnet", "eth_sendTransaction", obj)
	var h common.Hash
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
		t.Fatalf("eth_sendTransaction: HTTP %d, %v, %v", code, r, err)
	}
	return h
}

// TestRevertAfterSpeedupOnAnvil: a call that reverts, priced out by a base-fee spike and sped
// up, is mined as its speed-up on anvil (receipts by eth_getBlockReceipts) and becomes failed
// with the contract's reason, its minedHash the speed-up's; the account's next send is mined
// at the next nonce (no filler took it). On a SQLite store and on a PostgreSQL one.
func TestRevertAfterSpeedupOnAnvil(t *testing.T) { bumpStores(t, testRevertAfterSpeedupOnAnvil) }

func testRevertAfterSpeedupOnAnvil(t *testing.T, dsn string) {
	node, _, _, acct, g := startBump(t, dsn, "{pollInterval: 100ms, bump: {enabled: false}}", nil)
	deploy := sendObject(t, g, txObject(acct, true, map[string]any{"to": nil, "value": "0x0", "gas": "0x30000", "data": revertCreation()}))
	mine(t, node)
	raw, err := node.Call("eth_getTransactionReceipt", deploy.Hex())
	var rc struct {
		Status          string          `json:"status"`
		ContractAddress *common.Address `json:"contractAddress"`
	}
	if err != nil || json.Unmarshal(raw, &rc) != nil || rc.Status != "0x1" || rc.ContractAddress == nil {
		t.Fatalf("deploy receipt: %s %v", raw, err)
	}
	first := sendObject(t, g, txObject(acct, true, map[string]any{"to": rc.ContractAddress.Hex(), "value": "0x0", "gas": "0x20000", "data": "0x12345678"}))
	setBaseFee(t, node, 20*gwei)
	mine(t, node)
	code, b := rest(t, http.MethodPost, g.API+"/v1/transactions/"+first.Hex()+"/speedup", "e2e-token", "")
	var ans struct {
		Signed bumpVersion `json:"signed"`
	}
	if code != 200 || json.Unmarshal(b, &ans) != nil || ans.Signed.Kind != "speedup" {
		t.Fatalf("speed-up: %d %s", code, b)
	}
	mineUntil(t, node, 10*time.Second, "failed", func() bool { return revertStatusOf(t, g, first).State == "failed" })
	s := revertStatusOf(t, g, first)
	if s.Error == nil || *s.Error != "execution reverted: web3gate test revert" || s.BlockNumber == nil || s.MinedHash == nil || *s.MinedHash != ans.Signed.Hash {
		t.Fatalf("reverted speed-up: %+v (error %v), want minedHash %s", s, s.Error, ans.Signed.Hash.Hex())
	}
	// anvil answers eth_getBlockReceipts: the confirmer read the block's receipts at once.
	var blockReceipts bool
	for _, l := range metric(t, g, "web3gate_upstream_requests_total") {
		blockReceipts = blockReceipts || strings.Contains(l, `method="eth_getBlockReceipts"`) && strings.Contains(l, `outcome="ok"`)
	}
	if !blockReceipts {
		t.Fatalf("no eth_getBlockReceipts answered: %v", metric(t, g, "web3gate_upstream_requests_total"))
	}
	next := send(t, g, acct)
	mineUntil(t, node, 10*time.Second, "mined", func() bool { return settled(status(t, g, next)) })
	if n := status(t, g, next).Nonce; n != s.Nonce+1 {
		t.Fatalf("next send at nonce %d, want %d", n, s.Nonce+1)
	}
	// The reverted request stays failed as blocks go by.
	for range 3 {
		mine(t, node)
	}
	time.Sleep(300 * time.Millisecond)
	if got := revertStatusOf(t, g, first); got.State != "failed" {
		t.Fatalf("after more blocks: %+v", got)
	}
}
