package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/e2e/anvil"
)

// What ethers and viem show a dapp when web3gate replaces the transaction whose hash it
// returned: a fee bump (wallet.transactions.bump) after a base-fee spike, a speed-up and a
// cancel (POST /v1/transactions/{hash}/speedup, /cancel). The scripts drive anvil (--no-mining: no block but
// theirs) and check the libraries' documented replacement outcome; this side checks anvil's
// blocks and web3gate's records and metrics after them.

const (
	// replacementChainID is anvil's default chain id, served as mainnet.
	replacementChainID = 31337
	// replacementTransactions bumps a transaction two blocks without it, and reads blocks
	// every 100 ms: the scripts mine one every 400 ms.
	replacementTransactions = "{pollInterval: 100ms, bump: {after: 2}}"
)

// TestReplacementEthers: ethers v6 tx.wait() rejects with TransactionReplacedError, reason
// "repriced" (bump, speed-up) and "cancelled" (cancel), carrying the replacement's receipt.
func TestReplacementEthers(t *testing.T) {
	runReplacementScript(t, "ethers", "js/replace-ethers.mjs")
}

// TestReplacementViem: viem waitForTransactionReceipt calls onReplaced with reason
// 'repriced' (bump, speed-up) and 'cancelled' (cancel) and returns the replacement's receipt.
func TestReplacementViem(t *testing.T) {
	runReplacementScript(t, "viem", "js/replace-viem.mjs")
}

// hashesRE is a script's report of one replacement: what, the original hash, the mined one.
var hashesRE = regexp.MustCompile(`(?m)^hashes (repriced|spedup|cancelled) (0x[0-9a-fA-F]{64}) (0x[0-9a-fA-F]{64})$`)

// runReplacementScript starts anvil without mining and web3gate in front of it with bumping
// after two blocks and one funded account, runs script with node as that account, and checks
// what the script reports against anvil and web3gate.
func runReplacementScript(t *testing.T, pkg, script string) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the %s test: install Node.js 20+ (.ci/run does)", pkg)
	}
	if _, err := os.Stat("node_modules/" + pkg + "/package.json"); err != nil {
		t.Fatalf("%s is not installed: run `npm ci --prefix e2e` (make test does)", pkg)
	}
	node := anvil.Start(t, replacementChainID, "--no-mining")
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	dir := t.TempDir()
	cfg := signingConfig(dir, replacementChainID, replacementTransactions, node.URL)
	acct := newAccount(t, writeConfig(t, dir, cfg))
	fund(t, node, acct)
	g := startGateway(t, cfg)
	waitReady(t, g)

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, script)
	cmd.Env = append(os.Environ(),
		"WEB3GATE_URL="+g.API+"/v1/web3/mainnet",
		"WEB3GATE_CLIENT_ID="+e2eCreds.clientID,
		"WEB3GATE_TOKEN="+e2eCreds.token,
		fmt.Sprintf("WEB3GATE_CHAIN_ID=%d", replacementChainID),
		"WEB3GATE_ACCOUNT="+acct.Hex(),
		"WEB3GATE_NODE_URL="+node.URL,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", script, out)
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within 150s", script)
	}
	if err != nil || strings.Contains(string(out), "FAIL") || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("%s: a check failed or the script did not finish (%v)", script, err)
	}

	// The script's hashes, checked on anvil and in web3gate's records.
	found := map[string][2]string{}
	for _, m := range hashesRE.FindAllStringSubmatch(string(out), -1) {
		found[m[1]] = [2]string{m[2], m[3]}
	}
	for _, tc := range []struct{ what, state string }{{"repriced", "mined"}, {"spedup", "mined"}, {"cancelled", "cancelled"}} {
		h, ok := found[tc.what]
		if !ok {
			t.Fatalf("%s reported no %s hashes", script, tc.what)
		}
		orig, repl := h[0], h[1]
		if rc := receiptOf(t, node, orig); rc != nil {
			t.Errorf("%s: anvil has a receipt for the original %s (block %s)", tc.what, orig, rc.BlockNumber)
		}
		if rc := receiptOf(t, node, repl); rc == nil || rc.Status != "0x1" || !strings.EqualFold(rc.From, acct.Hex()) {
			t.Errorf("%s: anvil's receipt of the replacement %s: %+v, want status 1 from %s", tc.what, repl, rc, acct.Hex())
		}
		for _, hash := range h {
			if st := txState(t, g, hash); st != tc.state && !(tc.state == "mined" && st == "confirmed") {
				t.Errorf("%s: web3gate's record of %s is %s, want %s", tc.what, hash, st, tc.state)
			}
		}
	}
	// Three nonces used, by the three replacements, and nothing left in anvil's pool.
	if n := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "latest"); n != 3 {
		t.Errorf("anvil counts %d transactions from %s, want 3 (the bump, the speed-up and the cancel)", n, acct.Hex())
	}
	if n := nodeUint(t, node, "eth_getTransactionCount", acct.Hex(), "pending"); n != 3 {
		t.Errorf("anvil's pending count of %s is %d, want 3: something is still in its pool", acct.Hex(), n)
	}

	// The metrics: at least one automatic bump, one speed-up, one cancel, three replaced
	// versions, one request cancelled.
	for _, m := range []struct {
		name, label string
		min         float64
	}{
		{"web3gate_tx_bumps_total", `reason="auto"`, 1},
		{"web3gate_tx_bumps_total", `reason="speedup"`, 1},
		{"web3gate_tx_bumps_total", `reason="cancel"`, 1},
		{"web3gate_tx_replaced_total", "", 3},
		{"web3gate_tx_cancelled_total", "", 1},
	} {
		if got := metricSum(t, g, m.name, m.label); got < m.min {
			t.Errorf("%s{%s} = %v, want at least %v:\n%s", m.name, m.label, got, m.min, strings.Join(metric(t, g, m.name), "\n"))
		}
	}
	checkNoOtherSender(t, node, acct)
}

// checkNoOtherSender checks the account's transactions in anvil's blocks: nonces 0, 1 and 2,
// once each (no filler, no second version of a nonce mined).
func checkNoOtherSender(t *testing.T, node *anvil.Node, acct common.Address) {
	t.Helper()
	nonces, byHash := accountNonces(t, node, acct)
	if !slices.Equal(nonces, []uint64{0, 1, 2}) || len(byHash) != 3 {
		t.Errorf("the account's mined nonces are %v, want [0 1 2] once each", nonces)
	}
}
