package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
)

// Fee bumping, speed-up and cancel against a real anvil that mines only when told
// (--no-mining, evm_mine): a transaction priced out by a base fee raised with
// anvil_setNextBlockBaseFeePerGas is re-signed with higher fees and mined, the account's
// later sends behind it too; a cap makes it stuck and a cancel frees the account; a kill -9
// between signing a bump and broadcasting it loses nothing.

const gwei = 1_000_000_000

// bumpVersion and bumpStatus are GET /v1/transactions/{hash}'s transaction, in part.
type bumpVersion struct {
	Hash                 common.Hash  `json:"hash"`
	Kind                 string       `json:"kind"`
	MaxFeePerGas         *hexutil.Big `json:"maxFeePerGas"`
	MaxPriorityFeePerGas *hexutil.Big `json:"maxPriorityFeePerGas"`
	GasPrice             *hexutil.Big `json:"gasPrice"`
	State                string       `json:"state"`
}

type bumpStatus struct {
	Hash      common.Hash   `json:"hash"`
	State     string        `json:"state"`
	Nonce     uint64        `json:"nonce"`
	MinedHash *common.Hash  `json:"minedHash"`
	Versions  []bumpVersion `json:"versions"`
}

// bumpConfig is signingConfig with a second principal ("other", token "other-token"), on
// the PostgreSQL database dsn when not empty.
func bumpConfig(dir, dsn string, chainID uint64, transactions string, urls ...string) string {
	cfg := strings.Replace(signingConfig(dir, chainID, transactions, urls...),
		"  tokens: [{sha256: "+sha256Hex("e2e-token")+", principal: e2e}]",
		"  tokens: [{sha256: "+sha256Hex("e2e-token")+", principal: e2e}, {sha256: "+sha256Hex("other-token")+", principal: other}]", 1)
	if dsn != "" {
		cfg = strings.Replace(cfg, "store:\n  path: "+filepath.Join(dir, "web3gate.db"),
			fmt.Sprintf("store:\n  driver: postgres\n  dsn: %s\n  maxConns: %d", dsn, replicaMaxConns), 1)
	}
	return cfg
}

// bumpStores runs test on a SQLite store and on a PostgreSQL one.
func bumpStores(t *testing.T, test func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { test(t, "") })
	t.Run("postgres", func(t *testing.T) { test(t, testengine.Postgres(t)) })
}

// startBump starts anvil without automatic mining, web3gate in front of it (through
// front, when not empty: a URL that forwards to anvil) on the store dsn (SQLite when empty)
// and a funded account.
func startBump(t *testing.T, dsn, transactions string, front func(anvilURL string) string) (node *anvil.Node, dir, cfg string, acct common.Address, g *gateway) {
	t.Helper()
	node, dir, cfg, accts, g := startBumpAccounts(t, dsn, transactions, "", front, 1)
	return node, dir, cfg, accts[0], g
}

// startBumpAccounts is startBump with n funded accounts and the config sections extra added.
func startBumpAccounts(t *testing.T, dsn, transactions, extra string, front func(anvilURL string) string, n int) (node *anvil.Node, dir, cfg string, accts []common.Address, g *gateway) {
	t.Helper()
	const chainID = 31337
	node = anvil.Start(t, chainID, "--no-mining")
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	dir = t.TempDir()
	url := node.URL
	if front != nil {
		url = front(node.URL)
	}
	cfg = bumpConfig(dir, dsn, chainID, transactions, url) + extra
	if dsn != "" && !strings.Contains(cfg, "driver: postgres") {
		t.Fatalf("the config did not take the PostgreSQL store:\n%s", cfg)
	}
	path := writeConfig(t, dir, cfg)
	for range n {
		acct := newAccount(t, path)
		fund(t, node, acct)
		accts = append(accts, acct)
	}
	g = startGateway(t, cfg)
	waitReady(t, g)
	return node, dir, cfg, accts, g
}

// rest sends a REST request to web3gate with token and returns the status and body.
func rest(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-API-Key", "e2e")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// status is GET /v1/transactions/{hash}'s transaction.
func status(t *testing.T, g *gateway, hash common.Hash) bumpStatus {
	t.Helper()
	code, b := rest(t, http.MethodGet, g.API+"/v1/transactions/"+hash.Hex(), "e2e-token", "")
	if code != 200 {
		t.Fatalf("GET /v1/transactions/%s: %d %s", hash.Hex(), code, b)
	}
	var out struct {
		Transaction bumpStatus `json:"transaction"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("status: %v: %s", err, b)
	}
	return out.Transaction
}

// send is eth_sendTransaction of a 1-wei transfer from acct with the fees left to web3gate.
func send(t *testing.T, g *gateway, acct common.Address) common.Hash {
	t.Helper()
	code, r, err := call(g.API+"/v1/web3/mainnet", "eth_sendTransaction",
		txObject(acct, true, map[string]any{"maxFeePerGas": nil, "maxPriorityFeePerGas": nil}))
	var h common.Hash
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
		t.Fatalf("eth_sendTransaction: HTTP %d, %v, %v", code, r, err)
	}
	return h
}

func mine(t *testing.T, node *anvil.Node) {
	t.Helper()
	if _, err := node.Call("evm_mine"); err != nil {
		t.Fatalf("evm_mine: %v", err)
	}
}

func setBaseFee(t *testing.T, node *anvil.Node, wei int64) {
	t.Helper()
	if _, err := node.Call("anvil_setNextBlockBaseFeePerGas", hexutil.EncodeBig(big.NewInt(wei))); err != nil {
		t.Fatalf("anvil_setNextBlockBaseFeePerGas: %v", err)
	}
}

// mineUntil mines a block every 250 ms until cond holds (at most within).
func mineUntil(t *testing.T, node *anvil.Node, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not %s within %v", what, within)
		}
		mine(t, node)
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(start)
}

func settled(s bumpStatus) bool {
	return s.State == "mined" || s.State == "confirmed" || s.State == "cancelled"
}

// TestFeeBumpOnAnvil: a send priced out by a base-fee spike is bumped and mined, the
// account's later sends (queued behind it) are mined in nonce order, and the status lists
// both hashes, the original replaced.
func TestFeeBumpOnAnvil(t *testing.T) { bumpStores(t, testFeeBumpOnAnvil) }

func testFeeBumpOnAnvil(t *testing.T, dsn string) {
	node, _, _, acct, g := startBump(t, dsn, "{pollInterval: 100ms, rebroadcastAfter: 2s, bump: {after: 2, percent: 12.5}}", nil)
	first := send(t, g, acct)
	orig := status(t, g, first)
	setBaseFee(t, node, 50*gwei) // far above the first send's fee cap
	mine(t, node)
	if rc := receiptOf(t, node, first.Hex()); rc != nil {
		t.Fatalf("the first send was mined at a base fee of 50 gwei (fee cap %v)", orig.Versions[0].MaxFeePerGas)
	}
	// anvil refuses a fee cap below the current base fee (geth would queue it): the later
	// sends are filled once web3gate has seen the new head (its latest block lives 500 ms).
	time.Sleep(700 * time.Millisecond)
	later := []common.Hash{send(t, g, acct), send(t, g, acct)}
	took := mineUntil(t, node, 30*time.Second, "mined after a bump", func() bool { return settled(status(t, g, first)) })

	s := status(t, g, first)
	if s.Hash != first || len(s.Versions) < 2 || s.Versions[0].Hash != first || s.Versions[0].Kind != "original" ||
		s.Versions[0].State != "replaced" || s.MinedHash == nil || *s.MinedHash == first {
		t.Fatalf("status after the bump: %+v", s)
	}
	var minedVersion *bumpVersion
	for i, v := range s.Versions[1:] {
		if v.Kind != "bump" {
			t.Errorf("version %d is a %s, want bump", i+1, v.Kind)
		}
		prev := s.Versions[i]
		if v.MaxFeePerGas.ToInt().Cmp(new(big.Int).Div(new(big.Int).Mul(prev.MaxFeePerGas.ToInt(), big.NewInt(1125)), big.NewInt(1000))) < 0 ||
			v.MaxPriorityFeePerGas.ToInt().Cmp(new(big.Int).Div(new(big.Int).Mul(prev.MaxPriorityFeePerGas.ToInt(), big.NewInt(1125)), big.NewInt(1000))) < 0 {
			t.Errorf("version %d fees %v/%v not 12.5 %% over %v/%v", i+1, v.MaxFeePerGas, v.MaxPriorityFeePerGas, prev.MaxFeePerGas, prev.MaxPriorityFeePerGas)
		}
		if v.Hash == *s.MinedHash {
			minedVersion = &s.Versions[i+1]
		}
	}
	if minedVersion == nil || minedVersion.State != "mined" {
		t.Fatalf("the mined hash %s is no version marked mined: %+v", s.MinedHash.Hex(), s.Versions)
	}
	// Any hash of the request finds it.
	if byBump := status(t, g, *s.MinedHash); byBump.Hash != first {
		t.Fatalf("GET by the bump's hash found %s", byBump.Hash.Hex())
	}
	rc := receiptOf(t, node, s.MinedHash.Hex())
	if rc == nil || rc.Status != "0x1" || receiptOf(t, node, first.Hex()) != nil {
		t.Fatalf("receipts: the bump's %v, the original's must be none", rc)
	}
	// The sends queued behind it are mined, in nonce order.
	prevBlock := rc.BlockNumber
	mineUntil(t, node, 15*time.Second, "the later sends mined", func() bool {
		for _, h := range later {
			if !settled(status(t, g, h)) {
				return false
			}
		}
		return true
	})
	for i, h := range later {
		ls := status(t, g, h)
		r := receiptOf(t, node, ls.MinedHash.Hex())
		if r == nil || r.Status != "0x1" || ls.Nonce != uint64(i+1) || hexutil.MustDecodeUint64(r.BlockNumber) < hexutil.MustDecodeUint64(prevBlock) {
			t.Fatalf("later send %d: %+v, receipt %+v (previous block %s)", i, ls, r, prevBlock)
		}
		prevBlock = r.BlockNumber
	}
	if lines := metric(t, g, `web3gate_tx_bumps_total{chain="31337",reason="auto"}`); len(lines) != 1 {
		t.Errorf("bump metric: %q", lines)
	}
	if lines := metric(t, g, `web3gate_tx_replaced_total{chain="31337"}`); len(lines) != 1 || strings.HasSuffix(lines[0], " 0") {
		t.Errorf("replaced metric: %q", lines)
	}
	t.Logf("priced out by a 50 gwei base fee: %d versions, mined %v after the spike (blocks every 250 ms, bump after 2 blocks); fee cap %v -> %v",
		len(s.Versions), took.Round(10*time.Millisecond), s.Versions[0].MaxFeePerGas, minedVersion.MaxFeePerGas)
}

// TestFeeBumpCapStuckThenCancel: with maxFeeCap below what the chain needs the send becomes
// stuck; the speed-up route refuses fees under the replacement rule (400), above the cap
// (403) and other principals (404); a cancel with an explicit fee under the cap, once the
// base fee fell, is mined and frees the account; a settled request is a conflict (409).
func TestFeeBumpCapStuckThenCancel(t *testing.T) {
	node, _, _, acct, g := startBump(t, "", `{pollInterval: 100ms, rebroadcastAfter: 2s, bump: {after: 2, maxFeeCap: "10000000000"}}`, nil)
	first := send(t, g, acct)
	setBaseFee(t, node, 50*gwei)
	mineUntil(t, node, 20*time.Second, "stuck", func() bool { return status(t, g, first).State == "stuck" })
	s := status(t, g, first)
	if len(s.Versions) != 1 {
		t.Fatalf("a stuck request signed versions past the cap: %+v", s)
	}
	if lines := metric(t, g, `web3gate_tx_stuck_total{chain="31337"}`); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Errorf("stuck metric: %q", lines)
	}
	// The confirmer's count of the chain's unsettled requests sees it stuck.
	stuckOpen := func() float64 { return metricValues(t, g, "web3gate_tx_open")[`{chain="31337",state="stuck"}`] }
	wait.Within(t, 10*time.Second, "web3gate_tx_open{state=stuck} 1", func() bool { return stuckOpen() == 1 })
	tip := s.Versions[0].MaxPriorityFeePerGas.ToInt()
	fees := func(feeCap, tip *big.Int) string {
		return fmt.Sprintf(`{"maxFeePerGas":%q,"maxPriorityFeePerGas":%q}`, hexutil.EncodeBig(feeCap), hexutil.EncodeBig(tip))
	}
	url := g.API + "/v1/transactions/" + first.Hex()
	for _, tc := range []struct {
		name, path, token, body string
		status                  int
		want                    string
	}{
		{"under the replacement rule", "/speedup", "e2e-token", fees(big.NewInt(9*gwei), tip), 400, "at least"},
		{"above maxFeeCap", "/speedup", "e2e-token", fees(big.NewInt(11*gwei), big.NewInt(2*gwei)), 403, "maxFeeCap"},
		{"legacy fees for a type 2", "/cancel", "e2e-token", `{"gasPrice":"0x1"}`, 400, "type 2"},
		{"malformed body", "/cancel", "e2e-token", `{"fee":1}`, 400, "JSON object"},
		{"another principal", "/speedup", "other-token", "", 404, "no transaction"},
		{"no token", "/speedup", "", "", 401, ""},
	} {
		code, b := rest(t, http.MethodPost, url+tc.path, tc.token, tc.body)
		if code != tc.status || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s; want %d mentioning %q", tc.name, code, b, tc.status, tc.want)
		}
	}
	if code, _ := rest(t, http.MethodGet, url, "other-token", ""); code != 404 {
		t.Errorf("GET by another principal: %d, want 404", code)
	}

	// The base fee falls below the cap; the cancel pays 9 gwei, under it.
	setBaseFee(t, node, 4*gwei)
	mine(t, node)
	code, b := rest(t, http.MethodPost, url+"/cancel", "e2e-token", fees(big.NewInt(9*gwei), big.NewInt(2*gwei)))
	if code != 200 {
		t.Fatalf("cancel: %d %s", code, b)
	}
	var ans struct {
		Transaction bumpStatus      `json:"transaction"`
		Signed      bumpVersion     `json:"signed"`
		Error       json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Signed.Kind != "cancel" || ans.Signed.MaxFeePerGas.ToInt().Int64() != 9*gwei ||
		string(ans.Error) != "null" || len(ans.Transaction.Versions) != 2 {
		t.Fatalf("cancel answer: %s (%v)", b, err)
	}
	mineUntil(t, node, 15*time.Second, "cancelled", func() bool { return status(t, g, first).State == "cancelled" })
	s = status(t, g, first)
	if *s.MinedHash != ans.Signed.Hash || s.Versions[0].State != "replaced" || s.Versions[1].State != "mined" {
		t.Fatalf("after the cancel: %+v", s)
	}
	raw, err := node.Call("eth_getTransactionByHash", ans.Signed.Hash.Hex())
	var tx struct {
		To    common.Address `json:"to"`
		Value *hexutil.Big   `json:"value"`
		Nonce hexutil.Uint64 `json:"nonce"`
	}
	if err != nil || json.Unmarshal(raw, &tx) != nil || tx.To != acct || tx.Value.ToInt().Sign() != 0 || tx.Nonce != 0 {
		t.Fatalf("the cancel on chain: %s %v", raw, err)
	}
	// The account sends again.
	next := send(t, g, acct)
	mineUntil(t, node, 15*time.Second, "the next send mined", func() bool { return settled(status(t, g, next)) })
	if ns := status(t, g, next); ns.Nonce != 1 {
		t.Fatalf("the next send: %+v", ns)
	}
	// Settled: a conflict.
	if code, b := rest(t, http.MethodPost, url+"/speedup", "e2e-token", ""); code != 409 || !strings.Contains(string(b), "cancelled") {
		t.Errorf("speed-up of a cancelled request: %d %s", code, b)
	}
	if code, b := rest(t, http.MethodPost, g.API+"/v1/transactions/"+next.Hex()+"/speedup", "e2e-token", ""); code != 409 || !strings.Contains(string(b), "already") {
		t.Errorf("speed-up of a mined request: %d %s", code, b)
	}
	if lines := metric(t, g, `web3gate_tx_cancelled_total{chain="31337"}`); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Errorf("cancelled metric: %q", lines)
	}
	wait.Within(t, 10*time.Second, "web3gate_tx_open{state=stuck} 0", func() bool { return stuckOpen() == 0 })
}

// TestSpeedupOnAnvil: a speed-up with no body bumps by the rules at once, one with explicit
// fees signs those; the mined one settles the request.
func TestSpeedupOnAnvil(t *testing.T) {
	node, _, _, acct, g := startBump(t, "", "{pollInterval: 100ms, bump: {enabled: false}}", nil)
	first := send(t, g, acct)
	setBaseFee(t, node, 20*gwei)
	mine(t, node)
	url := g.API + "/v1/transactions/" + first.Hex() + "/speedup"
	code, b := rest(t, http.MethodPost, url, "e2e-token", "")
	if code != 200 {
		t.Fatalf("speed-up by the rules: %d %s", code, b)
	}
	var ans struct {
		Signed bumpVersion `json:"signed"`
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Signed.Kind != "speedup" || ans.Signed.MaxFeePerGas.ToInt().Cmp(big.NewInt(2*17*gwei)) < 0 {
		t.Fatalf("speed-up answer: %s", b)
	}
	// Explicit fees, by the speed-up's own hash.
	explicit := fmt.Sprintf(`{"maxFeePerGas":%q,"maxPriorityFeePerGas":%q}`, hexutil.EncodeBig(big.NewInt(100*gwei)), hexutil.EncodeBig(big.NewInt(3*gwei)))
	code, b = rest(t, http.MethodPost, g.API+"/v1/transactions/"+ans.Signed.Hash.Hex()+"/speedup", "e2e-token", explicit)
	if code != 200 || !strings.Contains(string(b), `"maxFeePerGas":"0x174876e800"`) {
		t.Fatalf("explicit speed-up: %d %s", code, b)
	}
	mineUntil(t, node, 10*time.Second, "mined", func() bool { return settled(status(t, g, first)) })
	s := status(t, g, first)
	if len(s.Versions) != 3 || s.Versions[2].State != "mined" || s.Versions[0].State != "replaced" || s.Versions[1].State != "replaced" {
		t.Fatalf("after the speed-ups: %+v", s)
	}
}

// holdProxy forwards JSON-RPC to anvil and, while holding, keeps every
// eth_sendRawTransaction of a transaction after the first one unanswered (never forwarded;
// the first one's rebroadcasts pass); it records every signed transaction it was given.
type holdProxy struct {
	target string
	mu     sync.Mutex
	hold   bool
	first  common.Hash
	raws   map[common.Hash]*types.Transaction
	held   chan struct{} // closed when the hold is lifted
}

func (p *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var calls []struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		_ = json.Unmarshal(body, &calls)
	} else {
		var one struct {
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &one) == nil {
			calls = append(calls, one)
		}
	}
	holdThis := false
	p.mu.Lock()
	for _, c := range calls {
		if c.Method != "eth_sendRawTransaction" || len(c.Params) == 0 {
			continue
		}
		var raw hexutil.Bytes
		tx := new(types.Transaction)
		if json.Unmarshal(c.Params[0], &raw) != nil || tx.UnmarshalBinary(raw) != nil {
			continue
		}
		p.raws[tx.Hash()] = tx
		if p.first == (common.Hash{}) {
			p.first = tx.Hash()
		}
		if p.hold && tx.Hash() != p.first {
			holdThis = true
		}
	}
	held := p.held
	p.mu.Unlock()
	if holdThis {
		select {
		case <-held:
		case <-r.Context().Done():
		}
		http.Error(w, "held", http.StatusServiceUnavailable) // never forwarded
		return
	}
	resp, err := http.Post(p.target, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// TestFeeBumpKill9BeforeBroadcast: web3gate signs and stores a bump whose broadcast a proxy
// holds, and is killed with SIGKILL; restarted without the hold, it broadcasts the stored
// bump, which is mined; every transaction web3gate ever gave a node for the nonce is a
// version the status lists, and every listed version was given.
func TestFeeBumpKill9BeforeBroadcast(t *testing.T) { bumpStores(t, testFeeBumpKill9BeforeBroadcast) }

func testFeeBumpKill9BeforeBroadcast(t *testing.T, dsn string) {
	proxy := &holdProxy{hold: true, raws: map[common.Hash]*types.Transaction{}, held: make(chan struct{})}
	node, _, cfg, acct, g := startBump(t, dsn, "{pollInterval: 100ms, rebroadcastAfter: 2s, bump: {after: 2}}", func(u string) string {
		proxy.target = u
		srv := httptest.NewServer(proxy)
		t.Cleanup(srv.Close)
		return srv.URL
	})
	defer func() {
		proxy.mu.Lock()
		if proxy.hold {
			proxy.hold = false
			close(proxy.held)
		}
		proxy.mu.Unlock()
	}()
	first := send(t, g, acct)
	setBaseFee(t, node, 50*gwei)
	mineUntil(t, node, 20*time.Second, "a bump stored", func() bool {
		s := status(t, g, first)
		return len(s.Versions) >= 2 && s.Versions[len(s.Versions)-1].State == "signed"
	})
	stored := status(t, g, first)
	bump := stored.Versions[len(stored.Versions)-1].Hash
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-g.exited
	proxy.mu.Lock()
	proxy.hold = false
	close(proxy.held)
	proxy.mu.Unlock()
	if receiptOf(t, node, bump.Hex()) != nil {
		t.Fatal("the held bump reached anvil before the restart")
	}

	g2 := startGateway(t, cfg)
	waitReady(t, g2)
	took := mineUntil(t, node, 30*time.Second, "mined after the restart", func() bool { return settled(status(t, g2, first)) })
	s := status(t, g2, first)
	if s.MinedHash == nil || *s.MinedHash == first {
		t.Fatalf("after the restart: %+v", s)
	}
	if !strings.Contains(g2.logs.String(), "broadcasting a stored version") {
		t.Errorf("the restarted web3gate did not log broadcasting the stored bump")
	}
	tracked := map[common.Hash]bool{}
	for _, v := range s.Versions {
		tracked[v.Hash] = true
	}
	if !tracked[bump] {
		t.Fatalf("the bump stored before the kill, %s, is no longer tracked: %+v", bump.Hex(), s.Versions)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	given := map[common.Hash]bool{}
	for h, tx := range proxy.raws {
		if tx.Nonce() != 0 {
			continue
		}
		given[h] = true
		if !tracked[h] {
			t.Errorf("nonce 0 was signed as %s, not a tracked version", h.Hex())
		}
	}
	for h := range tracked {
		if !given[h] {
			t.Errorf("tracked version %s never reached a node", h.Hex())
		}
	}
	t.Logf("bump stored before the kill broadcast after the restart and mined %v later; %d versions tracked, %d given to the node",
		took.Round(10*time.Millisecond), len(tracked), len(given))
}

// sendHeader is eth_sendTransaction of obj with the X-Fee-Bump header (when not empty).
func sendHeader(t *testing.T, g *gateway, obj map[string]any, feeBump string) rpcReply {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "eth_sendTransaction", "params": []any{obj}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, g.API+"/v1/web3/mainnet", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "e2e")
	req.Header.Set("Authorization", "Bearer e2e-token")
	if feeBump != "" {
		req.Header.Set("X-Fee-Bump", feeBump)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r rpcReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFeeBumpWhoIsBumped: fees the caller set are not bumped without "X-Fee-Bump: allow"
// (bump.callerPriced false), are with it; filled fees are not with "X-Fee-Bump: deny"; an
// X-Fee-Bump value other than allow and deny is refused; a transaction handed out by
// eth_signTransaction cannot be sped up (409).
func TestFeeBumpWhoIsBumped(t *testing.T) {
	node, _, _, accts, g := startBumpAccounts(t, "", "{pollInterval: 100ms, rebroadcastAfter: 2s, bump: {after: 2}}", "", nil, 2)
	priced := func(from common.Address) map[string]any {
		return txObject(from, true, map[string]any{"maxFeePerGas": hexutil.EncodeBig(big.NewInt(3 * gwei)), "maxPriorityFeePerGas": hexutil.EncodeBig(big.NewInt(gwei))})
	}
	// The denied one queues behind the caller-priced one of the same account: priced out
	// too, it would be bumped without its header.
	filled := txObject(accts[0], true, map[string]any{"maxFeePerGas": nil, "maxPriorityFeePerGas": nil})
	if r := sendHeader(t, g, filled, "sometimes"); r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "X-Fee-Bump must be allow or deny") {
		t.Fatalf("X-Fee-Bump: sometimes: %v", r)
	}
	hashOf := func(r rpcReply) common.Hash {
		t.Helper()
		var h common.Hash
		if r.Error != nil || json.Unmarshal(r.Result, &h) != nil {
			t.Fatalf("send: %v", r)
		}
		return h
	}
	callerPriced := hashOf(sendHeader(t, g, priced(accts[0]), ""))
	allowed := hashOf(sendHeader(t, g, priced(accts[1]), "allow"))
	denied := hashOf(sendHeader(t, g, filled, "deny"))
	setBaseFee(t, node, 50*gwei)
	mineUntil(t, node, 20*time.Second, "the allowed one mined", func() bool { return settled(status(t, g, allowed)) })
	for range 4 { // more blocks than bump.after
		mine(t, node)
		time.Sleep(250 * time.Millisecond)
	}
	for name, h := range map[string]common.Hash{"caller priced, no header": callerPriced, "filled, deny": denied} {
		if s := status(t, g, h); len(s.Versions) != 1 || s.State != "broadcast" {
			t.Errorf("%s: bumped: %+v", name, s)
		}
	}
	if s := status(t, g, allowed); len(s.Versions) < 2 || s.Versions[1].Kind != "bump" {
		t.Errorf("caller priced, allow: %+v", s)
	}

	// eth_signTransaction: the caller holds the bytes.
	code, r, err := call(g.API+"/v1/web3/mainnet", "eth_signTransaction",
		txObject(accts[0], true, map[string]any{"maxFeePerGas": nil, "maxPriorityFeePerGas": nil}))
	var raw hexutil.Bytes
	if err != nil || code != 200 || r.Error != nil || json.Unmarshal(r.Result, &raw) != nil {
		t.Fatalf("eth_signTransaction: %d %v %v", code, r, err)
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	if code, b := rest(t, http.MethodPost, g.API+"/v1/transactions/"+tx.Hash().Hex()+"/speedup", "e2e-token", ""); code != 409 || !strings.Contains(string(b), "eth_signTransaction") {
		t.Errorf("speed-up of a handed-out transaction: %d %s", code, b)
	}
}
