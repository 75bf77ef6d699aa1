package anvil

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/web3gate/web3gate/internal/testproc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func chainIDOf(t *testing.T, n *Node) string {
	t.Helper()
	res, err := n.Call("eth_chainId")
	if err != nil {
		t.Fatalf("eth_chainId on %s: %v\n--- anvil output ---\n%s", n.URL, err, n.Output())
	}
	var id string
	if err := json.Unmarshal(res, &id); err != nil {
		t.Fatalf("eth_chainId on %s: result %s: %v", n.URL, res, err)
	}
	return id
}

func TestStartTwoNodesKillOne(t *testing.T) {
	mainnetLike := Start(t, 31337)
	polygon := Start(t, 137)

	if mainnetLike.Port == polygon.Port {
		t.Fatalf("both nodes on port %d", polygon.Port)
	}
	for _, tc := range []struct {
		name string
		node *Node
		want string
	}{
		{"31337", mainnetLike, "0x7a69"},
		{"137", polygon, "0x89"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chainIDOf(t, tc.node); got != tc.want {
				t.Errorf("eth_chainId = %s, want %s", got, tc.want)
			}
			if tc.node.URL != "http://127.0.0.1:"+strconv.Itoa(tc.node.Port) {
				t.Errorf("URL = %s, want it on 127.0.0.1:%d", tc.node.URL, tc.node.Port)
			}
		})
	}

	mainnetLike.Kill()
	if _, err := mainnetLike.Call("eth_chainId"); err == nil {
		t.Errorf("killed node on port %d still answers", mainnetLike.Port)
	}
	if got := chainIDOf(t, polygon); got != "0x89" {
		t.Errorf("surviving node: eth_chainId = %s, want 0x89", got)
	}
	// The port is free again once Kill has returned.
	l, err := net.Listen("tcp", mainnetLike.URL[len("http://"):])
	if err != nil {
		t.Errorf("port of killed node still bound: %v", err)
	} else {
		l.Close()
	}
}

func TestKillIsIdempotent(t *testing.T) {
	n := Start(t, 31337)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(n.Kill)
	}
	wg.Wait()
	n.Kill() // and again from t.Cleanup
}

func TestAutomine(t *testing.T) {
	n := Start(t, 31337)
	accounts, err := n.Call("eth_accounts")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	if err := json.Unmarshal(accounts, &addrs); err != nil || len(addrs) < 2 {
		t.Fatalf("eth_accounts = %s (%v), want at least 2 dev accounts", accounts, err)
	}
	tx := map[string]string{"from": addrs[0], "to": addrs[1], "value": "0x1"}
	res, err := n.Call("eth_sendTransaction", tx)
	if err != nil {
		t.Fatalf("eth_sendTransaction: %v", err)
	}
	var hash string
	if err := json.Unmarshal(res, &hash); err != nil {
		t.Fatalf("eth_sendTransaction = %s: %v", res, err)
	}
	// Automine seals the transaction without any further call, though the
	// receipt may appear a moment after the hash is returned.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := n.Call("eth_getTransactionReceipt", hash)
		if err != nil {
			t.Fatalf("eth_getTransactionReceipt: %v", err)
		}
		if string(res) != "null" {
			var receipt struct {
				BlockNumber string `json:"blockNumber"`
				Status      string `json:"status"`
			}
			if err := json.Unmarshal(res, &receipt); err != nil {
				t.Fatalf("receipt %s: %v", res, err)
			}
			if receipt.BlockNumber != "0x1" || receipt.Status != "0x1" {
				t.Errorf("receipt block %s status %s, want block 0x1 status 0x1", receipt.BlockNumber, receipt.Status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s not mined within 5s: is automine off?", hash)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCallReturnsRPCError(t *testing.T) {
	n := Start(t, 31337)
	_, err := n.Call("no_suchMethod", 1, "two")
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) {
		t.Fatalf("Call(no_suchMethod) error = %v (%T), want *RPCError", err, err)
	}
	if rpcErr.ErrorCode() != -32601 {
		t.Errorf("code = %d, want -32601 (method not found); error %v", rpcErr.ErrorCode(), rpcErr)
	}
}

func TestExtraArgs(t *testing.T) {
	n := Start(t, 1, "--accounts", "3")
	res, err := n.Call("eth_accounts")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	if err := json.Unmarshal(res, &addrs); err != nil {
		t.Fatalf("eth_accounts = %s: %v", res, err)
	}
	if len(addrs) != 3 {
		t.Errorf("eth_accounts with --accounts 3 returned %d accounts", len(addrs))
	}
}

func TestStartOnTakenPortIsBindError(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		take func(t *testing.T) int // occupies a port until the test ends
	}{
		{"plain listener", func(t *testing.T) int {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l.Addr().(*net.TCPAddr).Port
		}},
		{"another anvil with another chain id", func(t *testing.T) int {
			return Start(t, 5).Port
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := tc.take(t)
			n, err := start(bin, port, 31337, nil)
			if err == nil {
				n.Kill()
				t.Fatalf("start on taken port %d succeeded", port)
			}
			var be *bindError
			if !errors.As(err, &be) {
				t.Fatalf("start on taken port: error %v (%T), want *bindError", err, err)
			}
		})
	}
}

func TestStartWithBadFlagReportsOutput(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	port, err := testproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(bin, port, 31337, []string{"--no-such-flag"})
	if err == nil {
		n.Kill()
		t.Fatal("start with --no-such-flag succeeded")
	}
	var be *bindError
	if errors.As(err, &be) {
		t.Fatalf("start with --no-such-flag: got bind error %v, want a plain failure", err)
	}
	for _, want := range []string{"exited before answering", "--no-such-flag", "anvil output"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestBinaryMissingSaysHowToInstall(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)

	_, err := Binary()
	if err == nil {
		t.Fatal("Binary() found anvil in an empty module")
	}
	for _, want := range []string{"npm ci --prefix e2e", root} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Binary() error %q does not contain %q", err, want)
		}
	}
}

func TestBinaryOutsideModule(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := Binary()
	if err == nil {
		t.Fatal("Binary() outside a module succeeded")
	}
	for _, want := range []string{"go.mod", "npm ci --prefix e2e"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Binary() error %q does not contain %q", err, want)
		}
	}
}

func TestBinaryInRepository(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(filepath.ToSlash(bin), "/e2e/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil") {
		t.Errorf("Binary() = %s", bin)
	}
}
