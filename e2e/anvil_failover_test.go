package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
)

// TestAnvilFailover runs reads through web3gate to two real anvil nodes, kills the busier
// one under bounded load, and expects zero failed reads. A third anvil on the wrong chain id
// is detected at start and never sent a read.
func TestAnvilFailover(t *testing.T) {
	const chainID = 31337
	a0, a1 := anvil.Start(t, chainID), anvil.Start(t, chainID)
	wrong := anvil.Start(t, 999)
	g := startGateway(t, gatewayConfig(chainID, "cache: {enabled: false, coalesce: false}\n", a0.URL, a1.URL, wrong.URL))
	waitReady(t, g)

	url := g.API + "/v1/web3/mainnet"
	var (
		ok, failed atomic.Int64
		firstFail  atomic.Value
		wg         sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && i < 100000; i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}`, w*100000+i)
				code, b, err := rpc(url, body)
				if err != nil || code != 200 || !strings.Contains(string(b), `"result":"0x21e19e0c9bab2400000"`) {
					failed.Add(1)
					firstFail.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", code, b, err))
					continue
				}
				ok.Add(1)
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	n0, n1 := okReads(t, g, "anvil-0"), okReads(t, g, "anvil-1")
	victim, survivor := a0, "anvil-1"
	if n1 > n0 {
		victim, survivor = a1, "anvil-0"
	}
	before := okReads(t, g, survivor)
	victim.Kill()
	killedAt := ok.Load()
	wg.Wait()

	t.Logf("reads: %d ok, %d failed; %d before the kill; per node before the kill: anvil-0 %d, anvil-1 %d", ok.Load(), failed.Load(), killedAt, n0, n1)
	if failed.Load() != 0 {
		t.Fatalf("%d reads failed; first: %v", failed.Load(), firstFail.Load())
	}
	if ok.Load()-killedAt < 100 {
		t.Fatalf("only %d reads after the kill", ok.Load()-killedAt)
	}
	if after := okReads(t, g, survivor); after <= before {
		t.Fatalf("the surviving node %s served no reads after the kill (%d → %d)", survivor, before, after)
	}

	// The wrong-chain node: unhealthy, and asked nothing but eth_chainId.
	if h := metric(t, g, `web3gate_upstream_healthy{chain="anvil",node="anvil-2"}`); len(h) != 1 || !strings.HasSuffix(h[0], " 0") {
		t.Fatalf("wrong-chain node health: %v", h)
	}
	for _, line := range metric(t, g, `web3gate_upstream_requests_total{chain="anvil"`) {
		if strings.Contains(line, `node="anvil-2"`) && !strings.Contains(line, `method="eth_chainId"`) {
			t.Fatalf("the wrong-chain node was sent a request: %s", line)
		}
	}
	if !strings.Contains(g.logs.String(), "999") {
		t.Fatalf("no log names the wrong chain id 999:\n%s", g.logs.String())
	}
}

var okLine = regexp.MustCompile(`outcome="ok"\} (\d+)`)

// okReads is the count of successful eth_getBalance requests web3gate sent to node.
func okReads(t *testing.T, g *gateway, node string) int {
	t.Helper()
	for _, line := range metric(t, g, `web3gate_upstream_requests_total{chain="anvil",method="eth_getBalance",node="`+node+`",outcome="ok"}`) {
		if m := okLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

func waitReady(t *testing.T, g *gateway) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(t, g.Admin+"/readyz")
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
