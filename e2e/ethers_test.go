package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestEthersAgainstShippedConfig runs the binary as the README says (`go run .` with the
// shipped config.yaml, on the embedded dev chain) and drives it with ethers v6.
func TestEthersAgainstShippedConfig(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the ethers test: install Node.js 20+ (.ci/run does)")
	}
	if _, err := os.Stat("node_modules/ethers/package.json"); err != nil {
		t.Fatal("ethers is not installed: run `npm ci --prefix e2e` (make test does)")
	}
	g := startGateway(t, shippedConfig(t, t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "js/ethers-basic.mjs")
	cmd.Env = append(os.Environ(),
		"WEB3GATE_URL="+g.API+"/v1/web3/mainnet",
		"WEB3GATE_CLIENT_ID=web3gate-dev",
		"WEB3GATE_TOKEN=dev-access-token",
		"WEB3GATE_CHAIN_ID=1337",
		"WEB3GATE_FUNDED_ADDRESS=0x169E8AF7B0bE789C52Ee116Dc358C5df45b22903",
		"WEB3GATE_EXPECT_AUTH=1",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("ethers:\n%s", out)
	if err != nil {
		t.Fatalf("ethers checks failed: %v", err)
	}
	if strings.Contains(string(out), "skip") || !strings.Contains(string(out), "all checks passed") {
		t.Fatal("ethers skipped a check or did not finish")
	}
}
