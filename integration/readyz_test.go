package integration

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/store"
)

// readyBody is /readyz's JSON body.
type readyBody struct {
	Status string
	Reason string
	Chains []struct {
		ChainID uint64 `json:"chainId"`
		Name    string
		Healthy int `json:"healthyNodes"`
		Nodes   int
		OK      bool
	}
}

func readyz(t *testing.T, ts *testServer, query string) (int, readyBody) {
	t.Helper()
	code, body := get(t, ts.Admin+"/readyz"+query)
	var b readyBody
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("readyz%s: %d %s: %v", query, code, body, err)
	}
	return code, b
}

// closedPort is the URL of a loopback port nothing listens on: an upstream node that is down.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// twoChainsConfig serves chain 1 ("one") from url1 and chain 2 ("two") from url2, with the
// credentials of upstreamConfig and the log section logYAML (a YAML flow mapping).
func twoChainsConfig(logYAML, url1, url2, extra string) string {
	cfg := upstreamConfig("    - chainId: 2\n      name: two\n      urls: ["+url2+"]\n"+extra, url1)
	return strings.Replace(cfg, "log: {level: warn}", "log: "+logYAML, 1)
}

// TestReadyzPerChain: with chain 2's only node down, the replica is still ready (it serves
// chain 1) and says which chain cannot be served; /readyz?chain=ID answers for one chain.
func TestReadyzPerChain(t *testing.T) {
	up := newFakeUpstream(t, 1)
	ts := startServer(t, twoChainsConfig("{level: warn}", up.srv.URL, closedPort(t), ""))

	var code int
	var b readyBody
	wait.For(t, "chain 1 healthy in /readyz", func() bool {
		code, b = readyz(t, ts, "")
		return code == 200 && len(b.Chains) == 2 && b.Chains[0].OK
	})
	one, two := b.Chains[0], b.Chains[1]
	if b.Status != "ok" || one.ChainID != 1 || one.Name != "one" || one.Healthy != 1 || one.Nodes != 1 ||
		two.ChainID != 2 || two.Name != "two" || two.OK || two.Healthy != 0 || two.Nodes != 1 {
		t.Fatalf("readyz %d %+v", code, b)
	}
	if !strings.Contains(b.Reason, "two (2)") {
		t.Errorf("reason %q does not name chain two", b.Reason)
	}

	if code, b := readyz(t, ts, "?chain=2"); code != 503 || b.Status != "unavailable" || !strings.Contains(b.Reason, "two (2)") ||
		len(b.Chains) != 1 || b.Chains[0].ChainID != 2 {
		t.Errorf("readyz?chain=2: %d %+v", code, b)
	}
	if code, b := readyz(t, ts, "?chain=1"); code != 200 || b.Status != "ok" || len(b.Chains) != 1 || !b.Chains[0].OK {
		t.Errorf("readyz?chain=1: %d %+v", code, b)
	}
	if code, b := readyz(t, ts, "?chain=3"); code != 404 || !strings.Contains(b.Reason, "chain 3 is not served here") {
		t.Errorf("readyz?chain=3: %d %+v", code, b)
	}
	if code, b := readyz(t, ts, "?chain=x"); code != 400 || !strings.Contains(b.Reason, "chain:") {
		t.Errorf("readyz?chain=x: %d %+v", code, b)
	}

	// The chain that is served answers; the other one says it has no healthy node.
	if r := gwCall(t, ts.API, "eth_blockNumber", "[]"); r != `"0x64"` {
		t.Errorf("eth_blockNumber on chain 1: %s", r)
	}
	status, _, body := post(t, ts.API+"/v1/web3/chains/2", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`)
	if status != 503 || !strings.Contains(string(body), "-32011") {
		t.Errorf("eth_blockNumber on chain 2: %d %s", status, body)
	}
}

// TestReadyzNoChainServed: with every chain's nodes down the replica cannot serve: 503.
func TestReadyzNoChainServed(t *testing.T) {
	ts := startServer(t, twoChainsConfig("{level: error}", closedPort(t), closedPort(t), ""))
	code, b := readyz(t, ts, "")
	if code != 503 || b.Status != "unavailable" || !strings.Contains(b.Reason, "one (1), two (2)") || len(b.Chains) != 2 {
		t.Errorf("readyz %d %+v", code, b)
	}
}

// TestReadyzStoreDown: a store that does not answer makes the replica unready, whatever its
// chains; it is ready again once the store is back.
func TestReadyzStoreDown(t *testing.T) {
	pg := testengine.PrivatePostgres(t)
	up := newFakeUpstream(t, 1)
	cfg := testConfig(t, upstreamConfig("admin: {readyTimeout: 500ms}\n", up.srv.URL), t.TempDir())
	cfg.Store.Driver, cfg.Store.DSN, cfg.Store.Path = store.DriverPostgres, pg.DSN(), ""
	ts := startConfig(t, cfg, io.Discard)
	wait.For(t, "ready", func() bool { code, _ := readyz(t, ts, ""); return code == 200 })

	pg.Stop("fast")
	var b readyBody
	wait.For(t, "503 with the store down", func() bool {
		var code int
		code, b = readyz(t, ts, "")
		return code == 503
	})
	if b.Status != "unavailable" || b.Reason == "" || len(b.Chains) != 1 || !b.Chains[0].OK {
		t.Errorf("readyz with the store down: %+v", b)
	}
	if code, _ := readyz(t, ts, "?chain=1"); code != 503 {
		t.Errorf("readyz?chain=1 with the store down: %d", code)
	}

	pg.Start()
	wait.For(t, "ready again once the store is back", func() bool { code, _ := readyz(t, ts, ""); return code == 200 })
}
