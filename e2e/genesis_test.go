package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/e2e/anvil"
)

// A chain that started over: web3gate restarted with its store kept, on a chain that is new
// under the same chain id (the embedded dev chain at every start; anvil restarted). The next
// send must be mined, and the previous chain's transactions are reported abandoned.

// devCredentials are the shipped config's dev client id and token.
var devCredentials = [2]string{"web3gate-dev", "dev-access-token"}

// callWith is call with the given client id and token.
func callWith(creds [2]string, url, method string, params ...any) (rpcReply, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return rpcReply{}, err
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return rpcReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", creds[0])
	req.Header.Set("Authorization", "Bearer "+creds[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rpcReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcReply{}, err
	}
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil || r.Error == nil && r.Result == nil {
		return rpcReply{}, fmt.Errorf("HTTP %d, not a JSON-RPC answer: %s", resp.StatusCode, b)
	}
	return r, nil
}

// sendMined sends obj through g with creds and waits until g answers its receipt; it returns
// the hash and the transaction's nonce.
func sendMined(t *testing.T, g *gateway, creds [2]string, path string, obj map[string]any) (string, uint64) {
	t.Helper()
	url := g.API + path
	r, err := callWith(creds, url, "eth_sendTransaction", obj)
	var hash string
	if err != nil || r.Error != nil || json.Unmarshal(r.Result, &hash) != nil {
		t.Fatalf("eth_sendTransaction: %v, %v", r, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := callWith(creds, url, "eth_getTransactionReceipt", hash)
		if err != nil || r.Error != nil {
			t.Fatalf("eth_getTransactionReceipt %s: %v, %v", hash, r, err)
		}
		if string(r.Result) != "null" {
			var rc struct{ Status string }
			if json.Unmarshal(r.Result, &rc) != nil || rc.Status != "0x1" {
				t.Fatalf("receipt of %s: %s", hash, r.Result)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not mined within 30s (its nonce is not the chain's)", hash)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, err = callWith(creds, url, "eth_getTransactionByHash", hash)
	var tx struct{ Nonce hexutil.Uint64 }
	if err != nil || r.Error != nil || json.Unmarshal(r.Result, &tx) != nil {
		t.Fatalf("eth_getTransactionByHash %s: %v, %v", hash, r, err)
	}
	return hash, uint64(tx.Nonce)
}

// stateWith is the state GET /v1/transactions/{hash} reports, with creds.
func stateWith(t *testing.T, g *gateway, creds [2]string, hash string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.API+"/v1/transactions/"+hash, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", creds[0])
	req.Header.Set("Authorization", "Bearer "+creds[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Transaction struct {
			State string `json:"state"`
			Error string `json:"error"`
		} `json:"transaction"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET /v1/transactions/%s: HTTP %d %s", hash, resp.StatusCode, b)
	}
	if body.Transaction.State == "abandoned" && !strings.Contains(body.Transaction.Error, "started over") {
		t.Errorf("abandoned %s without the reason: %s", hash, b)
	}
	return body.Transaction.State
}

// TestRestartOnNewDevChain: `go run .` twice in one directory with the shipped config. The
// second start's dev chain is new, the store is kept: the next send is mined with nonce 0,
// the previous run's transaction is abandoned, and the start says so.
func TestRestartOnNewDevChain(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	from := "0x169E8AF7B0bE789C52Ee116Dc358C5df45b22903" // dev account 0
	transfer := func(value string) map[string]any {
		return map[string]any{"from": from, "to": "0x000000000000000000000000000000000000dEaD",
			"gas": "0x5208", "gasPrice": "0x3b9aca00", "value": value, "data": "0x"}
	}

	g := startGatewayIn(t, dir, string(raw))
	waitReady(t, g)
	first, nonce := sendMined(t, g, devCredentials, "/v1/web3/mainnet", transfer("0x1"))
	if nonce != 0 {
		t.Fatalf("first send has nonce %d, want 0", nonce)
	}
	if err := g.stop(t, 30*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(dir + "/web3gate.db"); err != nil {
		t.Fatalf("the store is not in the working directory: %v", err)
	}

	g = startGatewayIn(t, dir, string(raw))
	waitReady(t, g)
	second, nonce := sendMined(t, g, devCredentials, "/v1/web3/mainnet", transfer("0x2"))
	if nonce != 0 {
		t.Fatalf("the send after the restart has nonce %d, want 0 (the new chain's)", nonce)
	}
	if s := stateWith(t, g, devCredentials, first); s != "abandoned" {
		t.Fatalf("the previous run's transaction is %s, want abandoned", s)
	}
	if s := stateWith(t, g, devCredentials, second); s != "mined" && s != "confirmed" && s != "broadcast" {
		t.Fatalf("the new transaction is %s", s)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "the dev chain started empty") || !strings.Contains(logs, `"abandoned":1`) {
		t.Fatalf("the start does not report the abandoned transaction:\n%s", logs)
	}
}

// TestRestartOnAnvilWithNewGenesis: web3gate in front of anvil; both stop; anvil starts again
// from a new genesis (same chain id) and web3gate with the same store: the next send is mined
// with nonce 0, the previous transaction is abandoned, and a warning names both geneses.
func TestRestartOnAnvilWithNewGenesis(t *testing.T) {
	const chainID = 31337
	node, dir, _, acct, g := startSigning(t, chainID, "{}")
	url := "/v1/web3/mainnet"
	e2e := [2]string{"e2e", "e2e-token"}
	first, nonce := sendMined(t, g, e2e, url, txObject(acct, true, nil))
	if nonce != 0 {
		t.Fatalf("first send has nonce %d, want 0", nonce)
	}
	res, err := node.Call("eth_getBlockByNumber", "0x0", false)
	var genesis struct {
		Hash      string
		Timestamp hexutil.Uint64
	}
	if err != nil || json.Unmarshal(res, &genesis) != nil {
		t.Fatalf("block 0: %s %v", res, err)
	}
	if err := g.stop(t, 30*time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	node.Kill()

	// A restart within the same second would give anvil the same genesis: name a new one.
	node = anvil.Start(t, chainID, "--timestamp", fmt.Sprint(uint64(genesis.Timestamp)+1))
	fund(t, node, acct)
	g = startGateway(t, signingConfig(dir, chainID, "{}", node.URL))
	waitReady(t, g)
	second, nonce := sendMined(t, g, e2e, url, txObject(acct, true, map[string]any{"value": "0x2"}))
	if nonce != 0 {
		t.Fatalf("the send after the restart has nonce %d, want 0 (the new chain's)", nonce)
	}
	if rc := waitReceipt(t, node, second); rc.Status != "0x1" {
		t.Fatalf("receipt status %s on the new anvil", rc.Status)
	}
	if s := stateWith(t, g, e2e, first); s != "abandoned" {
		t.Fatalf("the previous chain's transaction is %s, want abandoned", s)
	}
	logs := g.logs.String()
	if !strings.Contains(logs, "started over from a new genesis") || !strings.Contains(logs, genesis.Hash) || !strings.Contains(logs, `"abandoned":1`) {
		t.Fatalf("no warning naming the previous genesis %s:\n%s", genesis.Hash, logs)
	}
}
