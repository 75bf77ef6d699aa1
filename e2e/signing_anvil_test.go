package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	_ "modernc.org/sqlite" // reads the store in dumpCrashState

	"github.com/web3gate/web3gate/e2e/anvil"
)

// The nonce manager against real anvil nodes: eth_signTransaction results submitted by the
// caller on a chain with id 137, and a kill -9 in the middle of a burst of eth_sendTransaction.

const (
	signingPassphrase = "signing-e2e-passphrase"
	// fundWei is what each test account gets on anvil: 1,000,000 ether.
	fundWei = "0xd3c21bcecceda1000000"
	// tenGwei is a fee above anvil's base fee from the first block on.
	tenGwei = "0x2540be400"
)

// recipient receives the test transfers.
var recipient = common.HexToAddress("0x1111111111111111111111111111111111111111")

// rpcReply is a JSON-RPC response from web3gate.
type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (r rpcReply) String() string {
	if r.Error != nil {
		return fmt.Sprintf("error %d %q (data %s)", r.Error.Code, r.Error.Message, r.Error.Data)
	}
	return "result " + string(r.Result)
}

// call sends method(params...) to the gateway URL with the e2e credentials.
func call(url, method string, params ...any) (int, rpcReply, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return 0, rpcReply{}, err
	}
	code, b, err := rpc(url, string(body))
	if err != nil {
		return code, rpcReply{}, err
	}
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		return code, rpcReply{}, fmt.Errorf("HTTP %d, not a JSON-RPC response: %s", code, b)
	}
	if r.Error == nil && r.Result == nil {
		return code, rpcReply{}, fmt.Errorf("HTTP %d, neither result nor error: %s", code, b)
	}
	return code, r, nil
}

// signingConfig is gatewayConfig plus a store file and keystore in dir (absolute paths, so
// that every process started with it, in any working directory, shares them), the dev chain
// off, and the given wallet.transactions settings.
func signingConfig(dir string, chainID uint64, transactions string, urls ...string) string {
	return gatewayConfig(chainID, fmt.Sprintf(`
devchain: {enabled: false}
store:
  path: %s
wallet:
  keys:
    dir: %s
    lightScrypt: true
  transactions: %s
`, filepath.Join(dir, "web3gate.db"), filepath.Join(dir, "keystore"), transactions), urls...)
}

var addressRE = regexp.MustCompile(`0x[0-9a-fA-F]{40}`)

// newAccount creates an account for principal e2e with `web3gate accounts new`.
func newAccount(t *testing.T, cfgPath string) common.Address {
	t.Helper()
	cmd := exec.Command(binary, "accounts", "new", "--owner", "e2e", "--config", cfgPath)
	cmd.Dir = filepath.Dir(cfgPath)
	out, err := cmd.CombinedOutput()
	addr := addressRE.FindString(string(out))
	if err != nil || addr == "" {
		t.Fatalf("accounts new: %v\n%s", err, out)
	}
	return common.HexToAddress(addr)
}

// fund sets addr's balance on node.
func fund(t *testing.T, node *anvil.Node, addr common.Address) {
	t.Helper()
	if _, err := node.Call("anvil_setBalance", addr.Hex(), fundWei); err != nil {
		t.Fatalf("anvil_setBalance: %v", err)
	}
}

type receipt struct {
	Status      string `json:"status"`
	BlockNumber string `json:"blockNumber"`
	From        string `json:"from"`
}

// receiptOf is hash's receipt on node, or nil when it has none yet.
func receiptOf(t *testing.T, node *anvil.Node, hash string) *receipt {
	t.Helper()
	res, err := node.Call("eth_getTransactionReceipt", hash)
	if err != nil {
		t.Fatalf("eth_getTransactionReceipt %s: %v", hash, err)
	}
	if string(res) == "null" {
		return nil
	}
	var rc receipt
	if err := json.Unmarshal(res, &rc); err != nil {
		t.Fatalf("receipt of %s: %v: %s", hash, err, res)
	}
	return &rc
}

// waitReceipt waits up to 10 s for hash's receipt on node.
func waitReceipt(t *testing.T, node *anvil.Node, hash string) *receipt {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if rc := receiptOf(t, node, hash); rc != nil {
			return rc
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipt for %s within 10s", hash)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nodeUint is a quantity returned by node for method(params...).
func nodeUint(t *testing.T, node *anvil.Node, method string, params ...any) uint64 {
	t.Helper()
	res, err := node.Call(method, params...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	var n hexutil.Uint64
	if err := json.Unmarshal(res, &n); err != nil {
		t.Fatalf("%s: %v: %s", method, err, res)
	}
	return uint64(n)
}

// txObject is an eth_sendTransaction / eth_signTransaction object from `from`: a 1-wei
// transfer to recipient, legacy unless dynamic is set; each override replaces a field (nil
// removes it).
func txObject(from common.Address, dynamic bool, overrides map[string]any) map[string]any {
	o := map[string]any{
		"from":  from.Hex(),
		"to":    recipient.Hex(),
		"gas":   "0x5208",
		"value": "0x1",
		"data":  "0x",
	}
	if dynamic {
		o["maxFeePerGas"] = tenGwei
		o["maxPriorityFeePerGas"] = "0x3b9aca00"
	} else {
		o["gasPrice"] = tenGwei
	}
	for k, v := range overrides {
		if v == nil {
			delete(o, k)
		} else {
			o[k] = v
		}
	}
	return o
}

// startSigning starts anvil on chainID and web3gate in front of it with a state directory
// (dir; cfg is its config, with wallet.transactions set to transactions) and a funded
// keystore account acct of principal e2e, and waits until web3gate is ready.
func startSigning(t *testing.T, chainID uint64, transactions string) (node *anvil.Node, dir, cfg string, acct common.Address, g *gateway) {
	t.Helper()
	node = anvil.Start(t, chainID)
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	dir = t.TempDir()
	cfg = signingConfig(dir, chainID, transactions, node.URL)
	acct = newAccount(t, writeConfig(t, dir, cfg))
	fund(t, node, acct)
	g = startGateway(t, cfg)
	waitReady(t, g)
	return node, dir, cfg, acct, g
}

func TestSignTransactionOnAnvil137(t *testing.T) {
	const chainID = 137
	node, _, _, acct, g := startSigning(t, chainID, "{maxInFlight: 1000}")
	url := g.API + "/v1/web3/chains/137"
	signer := types.LatestSignerForChainID(big.NewInt(chainID))

	// signAndSubmit signs obj through web3gate, checks the signed transaction, submits it
	// to anvil directly and waits for a successful receipt.
	signAndSubmit := func(name string, obj map[string]any, wantType uint8, wantNonce uint64) {
		t.Helper()
		code, r, err := call(url, "eth_signTransaction", obj)
		if err != nil || code != 200 || r.Error != nil {
			t.Fatalf("%s: eth_signTransaction: HTTP %d, %v, %v", name, code, r, err)
		}
		var raw hexutil.Bytes
		if err := json.Unmarshal(r.Result, &raw); err != nil {
			t.Fatalf("%s: result %s is not 0x-hex bytes: %v", name, r.Result, err)
		}
		tx := new(types.Transaction)
		if err := tx.UnmarshalBinary(raw); err != nil {
			t.Fatalf("%s: decode the signed transaction: %v", name, err)
		}
		if tx.Type() != wantType {
			t.Errorf("%s: type %d, want %d", name, tx.Type(), wantType)
		}
		if tx.ChainId().Cmp(big.NewInt(chainID)) != 0 || !tx.Protected() {
			t.Errorf("%s: chain id %v, protected %v; want 137, EIP-155 protected", name, tx.ChainId(), tx.Protected())
		}
		if tx.Nonce() != wantNonce {
			t.Errorf("%s: nonce %d, want %d", name, tx.Nonce(), wantNonce)
		}
		if tx.To() == nil || *tx.To() != recipient || tx.Value().Cmp(big.NewInt(1)) != 0 || tx.Gas() != 21000 || len(tx.Data()) != 0 {
			t.Errorf("%s: to %v value %v gas %d data %x: not what was asked", name, tx.To(), tx.Value(), tx.Gas(), tx.Data())
		}
		from, err := types.Sender(signer, tx)
		if err != nil || from != acct {
			t.Fatalf("%s: sender %s (%v), want %s", name, from.Hex(), err, acct.Hex())
		}
		res, err := node.Call("eth_sendRawTransaction", raw.String())
		if err != nil {
			t.Fatalf("%s: anvil refused the signed transaction: %v", name, err)
		}
		var hash common.Hash
		if err := json.Unmarshal(res, &hash); err != nil || hash != tx.Hash() {
			t.Fatalf("%s: anvil answered %s, want the hash %s", name, res, tx.Hash().Hex())
		}
		if rc := waitReceipt(t, node, hash.Hex()); rc.Status != "0x1" || !strings.EqualFold(rc.From, acct.Hex()) {
			t.Fatalf("%s: receipt status %s from %s", name, rc.Status, rc.From)
		}
		t.Logf("%s: nonce %d, type %d, hash %s mined in block %s", name, tx.Nonce(), tx.Type(), hash.Hex(), waitReceipt(t, node, hash.Hex()).BlockNumber)
	}

	signAndSubmit("legacy", txObject(acct, false, nil), types.LegacyTxType, 0)
	signAndSubmit("type 2", txObject(acct, true, nil), types.DynamicFeeTxType, 1)

	// Refused requests take no nonce.
	stranger := common.HexToAddress("0x2222222222222222222222222222222222222222")
	for _, tc := range []struct {
		name   string
		obj    map[string]any
		status int
		code   int
		want   string
	}{
		{"nonce used already", txObject(acct, false, map[string]any{"nonce": "0x1"}), 200, -32000, "nonce too low: next nonce is 2"},
		{"nonce ahead", txObject(acct, false, map[string]any{"nonce": "0x3"}), 200, -32000, "nonce too high: next nonce is 2"},
		{"unknown account", txObject(stranger, false, nil), 401, 4100, "not held"},
		{"gas 1", txObject(acct, true, map[string]any{"gas": "0x1"}), 200, -32000, "intrinsic gas too low"},
		{"value above the balance", txObject(acct, false, map[string]any{"value": "0xc9f2c9cd04674edea40000000"}), 200, -32000, "insufficient funds"},
	} {
		code, r, err := call(url, "eth_signTransaction", tc.obj)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if code != tc.status || r.Error == nil || r.Error.Code != tc.code || !strings.Contains(strings.ToLower(r.Error.Message), strings.ToLower(tc.want)) {
			t.Errorf("%s: HTTP %d, %v; want HTTP %d, error %d mentioning %q", tc.name, code, r, tc.status, tc.code, tc.want)
		}
	}
	signAndSubmit("after the refusals", txObject(acct, true, nil), types.DynamicFeeTxType, 2)
	if n := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "latest"); n != 3 {
		t.Fatalf("anvil counts %d transactions from %s, want 3", n, acct.Hex())
	}
}

func TestCrashRecoveryKill9(t *testing.T) {
	const (
		chainID  = 31337
		total    = 300 // sends attempted in the burst
		workers  = 32
		killAt   = 60 // hashes returned before the kill
		deadline = 30 * time.Second
	)
	node, dir, cfg, acct, g := startSigning(t, chainID, "{maxInFlight: 1000, pollInterval: 100ms, rebroadcastAfter: 2s}")
	url := g.API + "/v1/web3/mainnet"

	var (
		next, returned    atomic.Int64
		killed            atomic.Bool
		mu                sync.Mutex
		hashes            []string // every hash web3gate returned
		beforeKill        int      // how many of them came back before the kill was decided
		failed, cutByKill atomic.Int64
		firstFail         atomic.Value
		wg                sync.WaitGroup
	)
	reached := make(chan struct{})
	var reachedOnce sync.Once
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= total && !killed.Load() {
				code, r, err := call(url, "eth_sendTransaction", txObject(acct, false, nil))
				var hash string
				if err == nil && code == 200 && r.Error == nil && json.Unmarshal(r.Result, &hash) == nil && len(hash) == 66 {
					mu.Lock()
					hashes = append(hashes, hash)
					if !killed.Load() {
						beforeKill++
					}
					mu.Unlock()
					if returned.Add(1) >= killAt {
						reachedOnce.Do(func() { close(reached) })
					}
					continue
				}
				if killed.Load() {
					cutByKill.Add(1) // the connection died with the process
					continue
				}
				failed.Add(1)
				firstFail.CompareAndSwap(nil, fmt.Sprintf("HTTP %d, %v, %v", code, r, err))
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		killed.Store(true)
		wg.Wait()
		t.Fatalf("only %d hashes within 60s; %d failures, first: %v", returned.Load(), failed.Load(), firstFail.Load())
	}
	killed.Store(true)
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-g.exited
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d sends failed before the kill; first: %v", failed.Load(), firstFail.Load())
	}
	seen := map[string]bool{}
	for _, h := range hashes {
		if seen[h] {
			t.Fatalf("two sends were answered with the same hash %s", h)
		}
		seen[h] = true
	}
	atKill := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "latest")
	t.Logf("before the kill: %d hashes returned; %d in all (%d raced the kill), %d requests cut by it; anvil had mined %d transactions from the account",
		beforeKill, len(hashes), len(hashes)-beforeKill, cutByKill.Load(), atKill)

	// Restart on the same store and keystore.
	g2 := startGateway(t, cfg)
	waitReady(t, g2)

	// Every returned hash is mined, successfully.
	until := time.Now().Add(deadline)
	stuck := waitMined(t, node, acct, hashes, deadline, nil, func(missing []string) {
		dumpCrashState(t, node, acct, filepath.Join(dir, "web3gate.db"), missing)
	})

	// Recovery finished: anvil's pool is empty (a gap would leave later nonces queued) and the
	// account's count is stable.
	var n uint64
	for stable := 0; stable < 5; {
		stuck.check(t)
		latest := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "latest")
		pend := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "pending")
		var pool struct{ Pending, Queued hexutil.Uint64 }
		res, err := node.Call("txpool_status")
		if err == nil {
			err = json.Unmarshal(res, &pool)
		}
		if err != nil {
			t.Fatalf("txpool_status: %v", err)
		}
		if latest == n && latest == pend && pool.Pending == 0 && pool.Queued == 0 {
			stable++
		} else {
			stable = 0
		}
		n = latest
		if time.Now().After(until) {
			dumpCrashState(t, node, acct, filepath.Join(dir, "web3gate.db"), nil)
			t.Fatalf("anvil not settled %v after the restart: latest nonce %d, pending %d, pool %d pending %d queued",
				deadline, latest, pend, pool.Pending, pool.Queued)
		}
		time.Sleep(200 * time.Millisecond)
	}
	recovered := strings.Count(g2.logs.String(), "recovered transaction sent")
	t.Logf("after the restart: %d transactions from the account mined; %d were sent without their hash reaching a caller; %d reserved rows signed and sent by recovery; anvil's pool cleared %d times (anvil bug, see anvilUnsticker)",
		n, int(n)-len(hashes), recovered, stuck.cleared)
	if n < uint64(len(hashes)) {
		t.Fatalf("anvil counts %d transactions, fewer than the %d hashes returned", n, len(hashes))
	}

	// One more send through the restarted gateway takes the next nonce.
	code, r, err := call(g2.API+"/v1/web3/mainnet", "eth_sendTransaction", txObject(acct, true, nil))
	var hash string
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &hash) != nil {
		t.Fatalf("send after the restart: HTTP %d, %v, %v", code, r, err)
	}
	if rc := waitReceipt(t, node, hash); rc.Status != "0x1" {
		t.Fatalf("the send after the restart mined with status %s", rc.Status)
	}
	res, err := node.Call("eth_getTransactionByHash", hash)
	if err != nil {
		t.Fatal(err)
	}
	var tx struct{ Nonce hexutil.Uint64 }
	if err := json.Unmarshal(res, &tx); err != nil {
		t.Fatalf("eth_getTransactionByHash: %v: %s", err, res)
	}
	if uint64(tx.Nonce) != n {
		t.Fatalf("the send after the restart has nonce %d, want %d (the account's transactions before it)", tx.Nonce, n)
	}
	if c := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "latest"); c != uint64(tx.Nonce)+1 {
		t.Fatalf("anvil counts %d transactions, want nonce %d + 1", c, tx.Nonce)
	}

	// web3gate's own records follow: every returned transaction is mined (or confirmed).
	all := append(slices.Clone(hashes), hash)
	for {
		var open []string
		for _, h := range all {
			if st := txState(t, g2, h); st != "mined" && st != "confirmed" {
				open = append(open, h+" "+st)
			}
		}
		if len(open) == 0 {
			break
		}
		if time.Now().After(until.Add(10 * time.Second)) {
			t.Fatalf("%d of web3gate's records are not mined, e.g. %s", len(open), open[0])
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Every nonce 0..n was used exactly once, and the returned hashes are among them.
	nonces, byHash := accountNonces(t, node, acct)
	if len(nonces) != int(n)+1 {
		t.Fatalf("%d transactions from the account in anvil's blocks, want %d", len(nonces), n+1)
	}
	for i, got := range nonces {
		if got != uint64(i) {
			t.Fatalf("nonces mined: %v, want 0..%d without gap or repeat", nonces, n)
		}
	}
	for _, h := range all {
		if _, ok := byHash[strings.ToLower(h)]; !ok {
			t.Fatalf("returned hash %s is not in any block", h)
		}
	}
}

// accountNonces reads every block of node and returns the sorted nonces of the transactions
// sent by addr, and their hashes (lower case).
func accountNonces(t *testing.T, node *anvil.Node, addr common.Address) ([]uint64, map[string]uint64) {
	t.Helper()
	head := nodeUint(t, node, "eth_blockNumber")
	var nonces []uint64
	byHash := map[string]uint64{}
	for b := uint64(0); b <= head; b++ {
		res, err := node.Call("eth_getBlockByNumber", hexutil.EncodeUint64(b), true)
		if err != nil {
			t.Fatalf("block %d: %v", b, err)
		}
		var blk struct {
			Transactions []struct {
				Hash  string         `json:"hash"`
				From  common.Address `json:"from"`
				Nonce hexutil.Uint64 `json:"nonce"`
			} `json:"transactions"`
		}
		if err := json.Unmarshal(res, &blk); err != nil {
			t.Fatalf("block %d: %v", b, err)
		}
		for _, tx := range blk.Transactions {
			if tx.From == addr {
				nonces = append(nonces, uint64(tx.Nonce))
				byHash[strings.ToLower(tx.Hash)] = uint64(tx.Nonce)
			}
		}
	}
	slices.Sort(nonces)
	return nonces, byHash
}

// txState is the state of web3gate's record of hash (GET /v1/transactions/{hash}).
func txState(t *testing.T, g *gateway, hash string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.API+"/v1/transactions/"+hash, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", "e2e")
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Transaction struct {
			State string `json:"state"`
		} `json:"transaction"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &body) != nil {
		t.Fatalf("GET /v1/transactions/%s: HTTP %d %s", hash, resp.StatusCode, b)
	}
	return body.Transaction.State
}

// dumpCrashState logs what anvil and web3gate's store know of addr's transactions, for a
// failure's diagnosis: the chain's nonces, anvil's pool, the missing hashes, and every row.
func dumpCrashState(t *testing.T, node *anvil.Node, addr common.Address, dbPath string, missing []string) {
	t.Helper()
	t.Logf("anvil: latest nonce %d, pending nonce %d, head block %d",
		nodeUint(t, node, "eth_getTransactionCount", addr.Hex(), "latest"),
		nodeUint(t, node, "eth_getTransactionCount", addr.Hex(), "pending"),
		nodeUint(t, node, "eth_blockNumber"))
	if res, err := node.Call("txpool_inspect"); err == nil {
		t.Logf("anvil txpool_inspect: %s", res)
	}
	for _, h := range missing {
		res, err := node.Call("eth_getTransactionByHash", h)
		t.Logf("missing %s: anvil has %s %v", h, res, err)
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Logf("open the store: %v", err)
		return
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, nonce, kind, state, COALESCE(hash, ''), COALESCE(error, ''), created_at, updated_at
		FROM txs WHERE address = ? OR lower(address) = lower(?) ORDER BY nonce, id`, addr.Hex(), addr.Hex())
	if err != nil {
		t.Logf("read the store: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, nonce                                int64
			kind, state, hash, msg, created, updated string
		)
		if err := rows.Scan(&id, &nonce, &kind, &state, &hash, &msg, &created, &updated); err != nil {
			t.Logf("row: %v", err)
			return
		}
		t.Logf("row %d nonce %d %s %s %s %q created %s updated %s", id, nonce, kind, state, hash, msg, created, updated)
	}
	var heads []string
	if hr, err := db.Query(`SELECT address, next_nonce FROM nonce_heads`); err == nil {
		for hr.Next() {
			var a string
			var n int64
			_ = hr.Scan(&a, &n)
			heads = append(heads, fmt.Sprintf("%s=%d", a, n))
		}
		hr.Close()
	}
	t.Logf("nonce heads: %v", heads)
}

// anvilUnsticker works around a bug of anvil's transaction pool (seen with anvil 1.7.1): after
// concurrent eth_sendRawTransaction calls from one sender arriving out of nonce order, a
// transaction whose nonce is the sender's next one can stay "queued" for good, and every later
// nonce behind it; automine never mines them (nor does --mixed-mining). It happens with anvil
// alone, without web3gate, a few times in a hundred bursts of 64 transfers from 32 workers; see
// foundry-rs/foundry#10122 for the same symptom. Clearing the sender's pool
// (anvil_removePoolTransactions) unsticks it, and is what a node dropping transactions looks
// like to web3gate: its confirmer must send them again (wallet.transactions.rebroadcastAfter).
type anvilUnsticker struct {
	node    *anvil.Node
	addr    common.Address
	last    uint64    // the sender's nonce at the last check
	since   time.Time // when last was first seen
	cleared int
}

// check clears the sender's pool when its next nonce has sat queued, with the count not
// moving, for a second.
func (u *anvilUnsticker) check(t *testing.T) {
	t.Helper()
	latest := nodeUint(t, u.node, "eth_getTransactionCount", u.addr.Hex(), "latest")
	if latest != u.last || u.since.IsZero() {
		u.last, u.since = latest, time.Now()
		return
	}
	if time.Since(u.since) < time.Second {
		return
	}
	res, err := u.node.Call("txpool_inspect")
	if err != nil {
		t.Fatalf("txpool_inspect: %v", err)
	}
	var pool struct {
		Pending map[string]map[string]string `json:"pending"`
		Queued  map[string]map[string]string `json:"queued"`
	}
	if err := json.Unmarshal(res, &pool); err != nil {
		t.Fatalf("txpool_inspect: %v: %s", err, res)
	}
	var queued map[string]string
	for a, txs := range pool.Queued {
		if common.HexToAddress(a) == u.addr {
			queued = txs
		}
	}
	if _, ok := queued[fmt.Sprint(latest)]; !ok {
		return // not the anvil bug: a real gap, or nothing waiting
	}
	if _, err := u.node.Call("anvil_removePoolTransactions", u.addr.Hex()); err != nil {
		t.Fatalf("anvil_removePoolTransactions: %v", err)
	}
	u.cleared++
	u.since = time.Now()
	t.Logf("anvil kept nonce %d of %s queued with the account at nonce %d (%d queued): its pool was cleared; web3gate must send them again",
		latest, u.addr.Hex(), latest, len(queued))
}
