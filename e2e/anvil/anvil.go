// Package anvil runs real anvil nodes (Foundry's local EVM chain) for tests.
//
// The binary comes from the npm package @foundry-rs/anvil-linux-amd64, pinned in
// e2e/package-lock.json and installed from the repository root with
//
//	npm ci --prefix e2e
//
// Tests that need anvil fail, never skip, when it is missing.
package anvil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/testproc"
)

const (
	// binaryRel is the binary's path inside the module, as npm ci --prefix e2e installs it.
	binaryRel = "e2e/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"

	// startTimeout bounds the wait for a started anvil to answer eth_chainId.
	startTimeout = 10 * time.Second
	// startAttempts is how many free ports Start tries when anvil cannot bind one.
	startAttempts = 5
	// pollInterval is the pause between readiness probes.
	pollInterval = 20 * time.Millisecond
	// probeTimeout bounds one readiness probe.
	probeTimeout = time.Second
	// callTimeout bounds one Call.
	callTimeout = 30 * time.Second
	// maxResponseSize bounds the body Call reads.
	maxResponseSize = 64 << 20
)

// installHint is the command that installs the binary, run from the module root.
const installHint = "npm ci --prefix e2e"

// Binary returns the path of the anvil binary installed by `npm ci --prefix e2e`,
// found relative to the module root, which it locates by walking up from the
// working directory to go.mod. Its error says exactly how to install it.
func Binary() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("locate anvil: %w; run from inside the web3gate module, with anvil installed at its root by: %s", err, installHint)
	}
	bin := filepath.Join(root, filepath.FromSlash(binaryRel))
	fi, err := os.Stat(bin)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("anvil binary not found at %s; install it from the repository root %s with: %s",
			bin, root, installHint)
	}
	if err != nil {
		return "", fmt.Errorf("anvil binary: %w; install it from the repository root %s with: %s", err, root, installHint)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("anvil at %s is not an executable file (mode %v); reinstall it from the repository root %s with: rm -rf e2e/node_modules && %s",
			bin, fi.Mode(), root, installHint)
	}
	return bin, nil
}

// moduleRoot walks up from the working directory to the first directory holding go.mod.
func moduleRoot() (string, error) {
	start, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	dir := start
	for {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod in %s or any parent", start)
		}
		dir = parent
	}
}

// Node is a running anvil process listening on 127.0.0.1.
type Node struct {
	URL     string // http://127.0.0.1:Port
	ChainID uint64
	Port    int

	bin  string
	args []string
	cmd  *exec.Cmd
	out  *testproc.Buffer // anvil's stdout and stderr, interleaved

	done    chan struct{} // closed once the process has been waited for
	waitErr error         // set before done is closed

	killOnce sync.Once

	transport *http.Transport
	client    *http.Client
}

// Start runs anvil on a free 127.0.0.1 port with the given chain id, automining
// (no --block-time) and logging off (--quiet), waits until it answers eth_chainId
// with that id (at most 10 s), and registers t.Cleanup to kill it and wait for it.
// extraArgs are appended to anvil's command line.
//
// It calls t.Fatalf, never t.Skip, when the binary is missing or anvil does not
// come up; the failure message includes anvil's output.
func Start(t testing.TB, chainID uint64, extraArgs ...string) *Node {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("anvil: %v", err)
	}
	var failures []string
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port, err := testproc.FreePort()
		if err != nil {
			t.Fatalf("anvil: %v", err)
		}
		n, err := start(bin, port, chainID, extraArgs)
		if err == nil {
			t.Cleanup(n.Kill)
			return n
		}
		var be *bindError
		if !errors.As(err, &be) {
			t.Fatalf("anvil: %v", err)
		}
		failures = append(failures, fmt.Sprintf("attempt %d: %v", attempt, err))
	}
	t.Fatalf("anvil: no free port after %d attempts:\n%s", startAttempts, strings.Join(failures, "\n"))
	return nil
}

// bindError reports that anvil could not listen on the chosen port; Start retries on another.
type bindError struct {
	port int
	msg  string
}

func (e *bindError) Error() string {
	return fmt.Sprintf("port %d taken: %s", e.port, e.msg)
}

// start launches one anvil on port and waits until it is ready.
// It returns a *bindError when the port turned out to be taken.
func start(bin string, port int, chainID uint64, extraArgs []string) (*Node, error) {
	args := []string{
		"--host", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--chain-id", strconv.FormatUint(chainID, 10),
		"--quiet",
	}
	args = append(args, extraArgs...)

	transport := &http.Transport{
		Proxy:               nil, // always talk to the local node directly
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	n := &Node{
		URL:       "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		ChainID:   chainID,
		Port:      port,
		bin:       bin,
		args:      args,
		out:       &testproc.Buffer{},
		done:      make(chan struct{}),
		transport: transport,
		client:    &http.Client{Transport: transport},
	}
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout = n.out
	n.cmd.Stderr = n.out
	n.cmd.SysProcAttr = sysProcAttr()
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", n.commandLine(), err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		close(n.done)
	}()

	if err := n.waitReady(); err != nil {
		n.Kill()
		return nil, err
	}
	return n, nil
}

// waitReady polls eth_chainId until anvil answers with n.ChainID, exits, or startTimeout passes.
func (n *Node) waitReady() error {
	want := "0x" + strconv.FormatUint(n.ChainID, 16)
	deadline := time.Now().Add(startTimeout)
	// Abandon a probe in flight as soon as anvil exits.
	exited, cancelExited := context.WithCancel(context.Background())
	defer cancelExited()
	go func() {
		select {
		case <-n.done:
			cancelExited()
		case <-exited.Done():
		}
	}()
	var lastErr error
	for {
		select {
		case <-n.done:
			out := n.out.String()
			if strings.Contains(strings.ToLower(out), "address already in use") {
				return &bindError{port: n.Port, msg: strings.TrimSpace(out)}
			}
			return fmt.Errorf("%s exited before answering eth_chainId: %v\n--- anvil output ---\n%s",
				n.commandLine(), n.waitErr, out)
		default:
		}
		ctx, cancel := context.WithTimeout(exited, probeTimeout)
		res, err := n.call(ctx, "eth_chainId")
		cancel()
		if err == nil {
			var got string
			if err := json.Unmarshal(res, &got); err != nil || !strings.EqualFold(got, want) {
				// Something else answers on this port: our anvil cannot have bound it.
				return &bindError{port: n.Port, msg: fmt.Sprintf("another server answered eth_chainId with %s, want %s", res, want)}
			}
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer eth_chainId within %v (last error: %v)\n--- anvil output ---\n%s",
				n.commandLine(), startTimeout, lastErr, n.out.String())
		}
		select {
		case <-n.done:
		case <-time.After(pollInterval):
		}
	}
}

// Kill sends SIGKILL to anvil now and waits for it to exit. It is idempotent and
// safe to call from several goroutines; Start registers it with t.Cleanup.
func (n *Node) Kill() {
	n.killOnce.Do(func() {
		select {
		case <-n.done:
		default:
			// An error here means the process has already exited; Wait reports it.
			_ = n.cmd.Process.Kill()
		}
		<-n.done
		n.transport.CloseIdleConnections()
	})
}

// Output returns what anvil has written to stdout and stderr so far.
func (n *Node) Output() string {
	return n.out.String()
}

// Fund gives addr (hex) 1,000 ether on the node (anvil_setBalance); a failure fails t.
func (n *Node) Fund(t testing.TB, addr string) {
	t.Helper()
	if _, err := n.Call("anvil_setBalance", addr, "0x3635c9adc5dea00000"); err != nil {
		t.Fatalf("anvil_setBalance %s: %v", addr, err)
	}
}

// Call sends one JSON-RPC request to the node and returns its result.
// A JSON-RPC error response is returned as *RPCError.
func (n *Node) Call(method string, params ...any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return n.call(ctx, method, params...)
}

func (n *Node) call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: 1, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize))
	if err != nil {
		return nil, fmt.Errorf("%s: read response: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, bytes.TrimSpace(raw))
	}
	var rr rpcResponse
	if err := json.Unmarshal(raw, &rr); err != nil {
		return nil, fmt.Errorf("%s: decode response %q: %w", method, raw, err)
	}
	if rr.Error != nil {
		return nil, rr.Error
	}
	if rr.Result == nil {
		return nil, fmt.Errorf("%s: response has neither result nor error: %s", method, raw)
	}
	return rr.Result, nil
}

// RPCError is a JSON-RPC error object returned by the node.
// It satisfies go-ethereum's rpc.Error and rpc.DataError.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("json-rpc error %d: %s (data %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// ErrorCode returns the JSON-RPC error code.
func (e *RPCError) ErrorCode() int { return e.Code }

// ErrorData returns the error's data member, or nil.
func (e *RPCError) ErrorData() any {
	if len(e.Data) == 0 {
		return nil
	}
	return e.Data
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

func (n *Node) commandLine() string {
	return n.bin + " " + strings.Join(n.args, " ")
}
