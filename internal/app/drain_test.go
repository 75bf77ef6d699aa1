package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/internal/leaktest"
)

// TestSIGTERMDrains: on SIGTERM /readyz answers 503 first while the public listener still
// answers requests; the listeners close after server.drainDelay; the components stop in
// reverse order.
func TestSIGTERMDrains(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg := shippedConfig(t)
	cfg.Server.DrainDelay = 200 * time.Millisecond
	var api, admin string
	ready := make(chan struct{})
	type during struct {
		readyz, rpc int
		body        string
		err         error
	}
	seen := make(chan during, 1)
	var logs logBuffer
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, app.Options{Log: &logs,
			Ready: func(a, b net.Addr) { api, admin = "http://"+a.String(), "http://"+b.String(); close(ready) },
			Draining: func() {
				var d during
				d.readyz, d.body, d.err = httpGet(admin + "/readyz")
				if d.err == nil {
					d.rpc, _, d.err = rpcPost(api)
				}
				seen <- d
			}})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run = %v before it was ready", err)
	case <-time.After(time.Minute):
		t.Fatal("not ready within a minute")
	}
	if code, body, err := httpGet(admin + "/readyz"); err != nil || code != 200 {
		t.Fatalf("readyz before SIGTERM: %d %s %v", code, body, err)
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var d during
	select {
	case d = <-seen:
	case <-time.After(time.Minute):
		t.Fatal("no drain within a minute of SIGTERM")
	}
	if d.err != nil || d.readyz != 503 || !strings.Contains(d.body, `"status":"draining"`) || d.rpc != 200 {
		t.Fatalf("while draining: readyz %d %s, JSON-RPC %d, %v; want 503 draining and 200", d.readyz, d.body, d.rpc, d.err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after SIGTERM", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of SIGTERM")
	}
	if _, _, err := rpcPost(api); err == nil {
		t.Error("the public listener still answers after Run returned")
	}
	if !strings.Contains(logs.String(), `"msg":"draining: /readyz answers 503, the listeners still serve"`) {
		t.Error("the drain is not logged")
	}
	leaktest.Check(t)
}

var client = &http.Client{Timeout: 10 * time.Second}

func httpGet(url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// rpcPost posts eth_chainId with the dev credentials to the API's mainnet route.
func rpcPost(api string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, api+"/v1/web3/mainnet", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", config.DevClientID)
	req.Header.Set("Authorization", "Bearer "+config.DevToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
