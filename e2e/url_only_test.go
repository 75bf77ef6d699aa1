package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/devchain"
)

// Dev accounts 5 and 6 sign locally in url-only.mjs (viem and ethers): no other test of a
// gateway uses them, so their nonces are the scripts' own.
const (
	urlOnlyViemAccount   = 5
	urlOnlyEthersAccount = 6
)

// TestURLOnlyWallets runs the binary with the shipped config, reads on a client id alone
// allowed and logs at debug, and drives it with viem http(url) and ethers JsonRpcProvider(url)
// carrying the client id in the URL and no header: reads, locally signed transactions sent
// raw and mined, 401 without or with a wrong client id, 4100 for eth_sendTransaction. Then
// neither the client id nor the wrong one appears in the logs or the metrics.
func TestURLOnlyWallets(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the URL-only test: install Node.js 20+ (.ci/run does)")
	}
	for _, pkg := range []string{"viem", "ethers"} {
		if _, err := os.Stat("node_modules/" + pkg + "/package.json"); err != nil {
			t.Fatalf("%s is not installed: run `npm ci --prefix e2e` (make test does)", pkg)
		}
	}
	key, wrongKey := randomClientID(t), randomClientID(t)
	g := startGateway(t, shippedConfig(t, t.TempDir(),
		"level: info", "level: debug",
		"- id: web3gate-dev", "- id: web3gate-dev\n    - id: "+key,
		"allowReadsWithClientId: false", "allowReadsWithClientId: true",
	))
	accounts, err := devchain.DevAccounts(urlOnlyEthersAccount + 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "js/url-only.mjs")
	cmd.Env = append(os.Environ(),
		"WEB3GATE_URL_PATH="+g.API+"/v1/web3/mainnet/"+key,
		"WEB3GATE_URL_QUERY="+g.API+"/v1/web3/chains/1337?apiKey="+key,
		"WEB3GATE_URL_NO_KEY="+g.API+"/v1/web3/mainnet",
		"WEB3GATE_URL_WRONG_KEY="+g.API+"/v1/web3/mainnet/"+wrongKey,
		"WEB3GATE_CHAIN_ID=1337",
		"WEB3GATE_VIEM_KEY=0x"+hexKey(accounts[urlOnlyViemAccount].Key),
		"WEB3GATE_ETHERS_KEY=0x"+hexKey(accounts[urlOnlyEthersAccount].Key),
		"WEB3GATE_HELD_ACCOUNT="+accounts[urlOnlyViemAccount].Address.Hex(),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("url-only.mjs:\n%s", out)
	if ctx.Err() != nil {
		t.Fatal("url-only.mjs did not finish within 120s")
	}
	if err != nil {
		t.Fatalf("URL-only checks failed: %v", err)
	}
	if strings.Contains(string(out), "FAIL") || !strings.Contains(string(out), "all checks passed") {
		t.Fatal("url-only.mjs: a check failed or the script did not finish")
	}

	// The requests were logged (at debug, one line per call), without the client ids.
	logs := g.logs.String()
	if !strings.Contains(logs, `"method":"eth_sendRawTransaction"`) {
		t.Fatalf("no debug line of the calls in the logs: the check below would prove nothing\n%s", logs)
	}
	for name, secret := range map[string]string{"the client id": key, "the wrong client id": wrongKey} {
		if strings.Contains(logs, secret) {
			t.Errorf("%s appears in the logs", name)
		}
	}
	// Requests with the client id in the path are counted under the route's name.
	var page strings.Builder
	for _, l := range metric(t, g, "web3gate_") {
		page.WriteString(l + "\n")
	}
	for _, want := range []string{
		`web3gate_rpc_requests_total{code="ok",method="eth_sendRawTransaction",route="mainnet"}`,
		`web3gate_rpc_requests_total{code="ok",method="eth_sendRawTransaction",route="chains"}`,
	} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("metrics have no %s", want)
		}
	}
	if strings.Contains(page.String(), key) || strings.Contains(page.String(), wrongKey) {
		t.Error("a client id appears in the metrics")
	}
}

// randomClientID is a client id nothing else holds, in the form `web3gate clients new` makes.
func randomClientID(t *testing.T) string {
	t.Helper()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "w3g_" + hex.EncodeToString(b[:])
}
