package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowNode is a real HTTP JSON-RPC server for chain 1 whose eth_getBalance takes delay.
func slowNode(t *testing.T, delay time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		result := `"0x1"`
		switch req.Method {
		case "eth_blockNumber":
			result = `"0x10"`
		case "eth_getBalance":
			time.Sleep(delay)
			result = `"0x2a"`
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSIGTERMDrainsInFlight sends SIGTERM while a slow read is in flight: the read completes,
// new connections are refused, and the process exits 0.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	node := slowNode(t, 1500*time.Millisecond)
	g := startGateway(t, gatewayConfig(1, "", node.URL))
	waitReady(t, g)

	type result struct {
		code int
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, body, err := rpc(g.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`)
		done <- result{code, body, err}
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := g.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.code != 200 || string(r.body) != `{"jsonrpc":"2.0","id":1,"result":"0x2a"}` {
		t.Fatalf("in-flight read during shutdown: %d %s %v", r.code, r.body, r.err)
	}
	select {
	case <-g.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("no exit within 15s of SIGINT")
	}
	if g.exitErr != nil {
		t.Fatalf("exit: %v", g.exitErr)
	}
	t.Logf("drained and stopped %v after the signal", time.Since(start).Round(time.Millisecond))
	if _, _, err := rpc(g.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`); err == nil {
		t.Fatal("a request after shutdown was answered")
	}
	if logs := g.logs.String(); !strings.Contains(logs, `"msg":"shutting down"`) || !strings.Contains(logs, `"msg":"stopped"`) {
		t.Fatalf("logs lack shutdown lines:\n%s", logs)
	}
}

func TestSIGTERMStopsDevChain(t *testing.T) {
	g := startGateway(t, shippedConfig(t, t.TempDir()))
	if err := g.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, g.logs.String())
	}
}

// TestCLI covers `config check`, `auth hash-token`, the dev-credential guard and bad usage,
// with their exit codes.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	realMainnet := shippedConfig(t, dir, "urls: [embedded]", "urls: [https://node.example/rpc]")
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  []string
	}{
		{"check shipped", []string{"config", "check", "--config", "config.yaml"}, "", 0, []string{"config.yaml: ok"}},
		{"check bad", []string{"config", "check", "--config", write("bad.yaml", "server: {listen: x, maxBatch: 0}\nupstreams: {chains: []}\n")}, "", 1, []string{`server.listen: "x" is not host:port`, "auth.clients: at least one client id is required", "upstreams.chains"}},
		{"check unknown key", []string{"config", "check", "--config", write("unknown.yaml", "servre: {}\n")}, "", 1, []string{`line 1: servre: unknown key "servre", did you mean "server"?`}},
		{"check missing file", []string{"config", "check", "--config", filepath.Join(dir, "nope.yaml")}, "", 1, []string{"no such file"}},
		{"dev token with real mainnet", []string{"--config", write("real.yaml", realMainnet)}, "", 1, []string{`the dev token "dev-access-token" is accepted only while the embedded dev chain serves mainnet`, `the dev client id "web3gate-dev"`}},
		{"hash token", []string{"auth", "hash-token"}, "dev-access-token\n", 0, []string{"b1e46dbebcf3fa8cd6338efbcd8a0e6d8a4efe3e802280151c1bad9eea00a361"}},
		{"hash empty token", []string{"auth", "hash-token"}, "", 2, []string{"give the token on standard input"}},
		{"unknown command", []string{"frobnicate"}, "", 2, []string{`unknown command "frobnicate"`}},
		{"bad flag", []string{"--nope"}, "", 2, []string{"unknown flag --nope"}},
		{"version", []string{"version"}, "", 0, []string{"web3gate ", "go1."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary, tc.args...)
			cmd.Dir = ".."
			cmd.Stdin = strings.NewReader(tc.stdin)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
