package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Dev accounts of the shipped config, held by its dev principal and funded: one per script so
// that the two do not share nonces.
const (
	ethersWalletAccount = "0x6145D132D1CD15C0a8820daE905beAF7b52fd3Da"
	viemWalletAccount   = "0x0a652890CD678618EED107818FBF1bA5E3F208C3"
)

// TestEthersWallet drives the binary, run with the shipped config on the embedded dev chain,
// with ethers v6 using a gateway account as a JSON-RPC signer: sendTransaction (legacy and
// type 2, mined), signTransaction, signMessage, signTypedData, and a send without a token.
func TestEthersWallet(t *testing.T) {
	runWalletScript(t, "ethers", "js/ethers-wallet.mjs", ethersWalletAccount)
}

// TestViemWallet does the same with viem and a JSON-RPC account: sendTransaction (legacy and
// type 2), signMessage, signTypedData, signTransaction then sendRawTransaction of the result.
func TestViemWallet(t *testing.T) {
	runWalletScript(t, "viem", "js/viem-wallet.mjs", viemWalletAccount)
}

// runWalletScript starts the gateway with the shipped config and runs script with node
// against it as account, failing unless every check passed.
func runWalletScript(t *testing.T, pkg, script, account string) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the %s test: install Node.js 20+ (.ci/run does)", pkg)
	}
	if _, err := os.Stat("node_modules/" + pkg + "/package.json"); err != nil {
		t.Fatalf("%s is not installed: run `npm ci --prefix e2e` (make test does)", pkg)
	}
	g := startGateway(t, shippedConfig(t, t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(),
		"WEB3GATE_URL="+g.API+"/v1/web3/mainnet",
		"WEB3GATE_CLIENT_ID=web3gate-dev",
		"WEB3GATE_TOKEN=dev-access-token",
		"WEB3GATE_CHAIN_ID=1337",
		"WEB3GATE_ACCOUNT="+account,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", script, out)
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within 90s", script)
	}
	if err != nil {
		t.Fatalf("%s checks failed: %v", pkg, err)
	}
	if strings.Contains(string(out), "FAIL") || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("%s: a check failed or the script did not finish", script)
	}
}
