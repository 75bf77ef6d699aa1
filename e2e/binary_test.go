// Package e2e holds the end-to-end tests: the web3gate binary, built once, run as a child
// process and spoken to over HTTP by real clients and real nodes (anvil, ethers).
package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/testproc"
	"github.com/web3gate/web3gate/openapi/openapitest"
)

var binary string // the web3gate binary built by TestMain

// answers checks every REST and admin answer of the gateways the tests start against the
// OpenAPI document (openapi/openapi.yaml): the transport of http.DefaultClient, of the
// clients that name none, and of the tests' own clients (answers.Wrap).
var answers = openapitest.Install()

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "web3gate-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "web3gate")
	build := exec.Command("go", "build", "-race", "-o", binary, ".")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build web3gate:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gateway is a running web3gate process.
type gateway struct {
	API, Admin string
	cmd        *exec.Cmd
	logs       *testproc.Buffer
	exited     chan struct{}
	exitErr    error
}

// startGateway runs the binary with the config text (written to a file) and extra args,
// in a new temporary directory, and waits until /healthz answers. It is killed when the test
// ends.
func startGateway(t *testing.T, cfgText string, args ...string) *gateway {
	t.Helper()
	return startGatewayIn(t, t.TempDir(), cfgText, args...)
}

// startGatewayIn is startGateway in the working directory dir, which also holds the config
// file: relative state paths (the shipped config's store, keystore and signing key) land in
// dir, so two starts in one dir are two `go run .` in one checkout.
func startGatewayIn(t *testing.T, dir, cfgText string, args ...string) *gateway {
	t.Helper()
	return startGatewayBinaryIn(t, binary, dir, cfgText, args...)
}

// startGatewayBinary is startGateway with another build of the binary.
func startGatewayBinary(t *testing.T, bin, cfgText string, args ...string) *gateway {
	t.Helper()
	return startGatewayBinaryIn(t, bin, t.TempDir(), cfgText, args...)
}

// startGatewayBinaryIn runs the binary bin in the working directory dir (see startGatewayIn).
func startGatewayBinaryIn(t *testing.T, bin, dir, cfgText string, args ...string) *gateway {
	t.Helper()
	cfgPath := writeConfig(t, dir, cfgText)
	api, admin := testproc.FreeAddr(t), testproc.FreeAddr(t)
	g := &gateway{API: "http://" + api, Admin: "http://" + admin, logs: &testproc.Buffer{}, exited: make(chan struct{})}
	g.cmd = exec.Command(bin, append([]string{"--config", cfgPath, "--listen", api, "--admin-listen", admin}, args...)...)
	g.cmd.Dir = dir
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.exitErr = g.cmd.Wait(); close(g.exited) }()
	answers.Register(t, api, admin)
	t.Cleanup(func() {
		_ = g.cmd.Process.Kill()
		<-g.exited
		if t.Failed() {
			t.Logf("web3gate logs:\n%s", g.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-g.exited:
			t.Fatalf("web3gate exited at start: %v\n%s", g.exitErr, g.logs.String())
		default:
		}
		if resp, err := http.Get(g.Admin + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("web3gate not up within 60s\n%s", g.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the exit.
func (g *gateway) stop(t *testing.T, within time.Duration) error {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.exited:
		return g.exitErr
	case <-time.After(within):
		t.Fatalf("web3gate did not exit within %v of SIGTERM", within)
		return nil
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// gatewayConfig serves chain as mainnet from urls, with client "e2e" and token "e2e-token".
func gatewayConfig(chainID uint64, extra string, urls ...string) string {
	return fmt.Sprintf(`
log: {level: info}
auth:
  clients: [{id: e2e}]
  tokens: [{sha256: %s, principal: e2e}]
upstreams:
  mainnet: %d
  timeout: 2s
  pollInterval: 200ms
  cooldown: 2s
  chains:
    - chainId: %d
      name: anvil
      urls: [%s]
# The load tests send as fast as they can, past the shipped budgets (docs/rate-limits.md).
rateLimit:
  client: {rate: 1000000, burst: 1000000}
  principal: {rate: 1000000, burst: 1000000}
%s`, sha256Hex("e2e-token"), chainID, chainID, strings.Join(urls, ", "), extra)
}

func rpc(url, body string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "e2e")
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// metric returns the lines of the admin /metrics page that start with name.
func metric(t *testing.T, g *gateway, name string) []string {
	t.Helper()
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name) {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// shippedConfig is the repository's config.yaml with its state (store file, keystore, JWT
// signing key) moved into dir, then the old/new replacement pairs applied.
func shippedConfig(t *testing.T, dir string, replace ...string) string {
	t.Helper()
	raw, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pairs := append([]string{
		"path: web3gate.db", "path: " + filepath.Join(dir, "web3gate.db"),
		"dir: keystore", "dir: " + filepath.Join(dir, "keystore"),
		"signingKeyFile: jwt-signing-key.pem", "signingKeyFile: " + filepath.Join(dir, "jwt-signing-key.pem"),
	}, replace...)
	out := string(raw)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(out, pairs[i]) {
			t.Fatalf("config.yaml has no %q to replace", pairs[i])
		}
		out = strings.Replace(out, pairs[i], pairs[i+1], 1)
	}
	return out
}

// writeConfig writes text to dir/config.yaml and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	return writeConfigAs(t, dir, "config.yaml", text)
}
