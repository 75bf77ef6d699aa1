//go:build attack

package integration

// The full-scale figure of the bounds of logs subscriptions' filters (docs/security.md):
// go test -tags attack -run TestAttackLogsSubscriptions -v ./integration/

import (
	"encoding/json"
	"fmt"
	"math/big"
	"runtime"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testproc"
	"github.com/web3gate/web3gate/internal/wait"
)

// heapMiB is the heap in use after a collection, in MiB.
func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// N2: 400 logs subscriptions (4 sockets × maxSubscriptionsPerConn 100) whose filters are as
// large as server.websocket.logsCriteria's defaults allow, in two shapes: the most JSON
// (10 addresses, 4 positions of 234 hashes: 9,360 addresses × topics, ~65 KB) and the most
// addresses (1000 addresses × 10 hashes: 10,000, ~46 KB). The whole gateway runs in this
// process, with the embedded dev chain.
func TestAttackLogsSubscriptions(t *testing.T) {
	ts := startServer(t, devConfig(t))
	n := 0
	list := func(count int, f func(*big.Int) string) []string {
		out := make([]string, count)
		for i := range out {
			n++
			out[i] = f(big.NewInt(int64(n)))
		}
		return out
	}
	addr := func(i *big.Int) string { return common.BigToAddress(i).Hex() }
	hash := func(i *big.Int) string { return common.BigToHash(i).Hex() }
	for _, shape := range []struct {
		name                         string
		addresses, positions, perPos int
	}{
		{"most JSON", 10, 4, 234},
		{"most addresses", 1000, 1, 10},
	} {
		filter := func() string {
			topics := make([]any, shape.positions)
			for i := range topics {
				topics[i] = list(shape.perPos, hash)
			}
			b, err := json.Marshal(map[string]any{"address": list(shape.addresses, addr), "topics": topics})
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 64<<10 {
				t.Fatalf("%s: a filter of %d bytes, over the default logsCriteria.maxBytes", shape.name, len(b))
			}
			return string(b)
		}
		baseHeap, baseRSS := heapMiB(), float64(testproc.RSS(t, 0))/(1<<20)
		var socks []*wsClient
		size := 0
		for range 4 {
			w, _ := dialWS(t, ts, "/v1/web3/mainnet", nil)
			socks = append(socks, w)
			for i := range 100 {
				f := filter()
				size = len(f)
				r := w.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_subscribe","params":["logs",%s]}`, i, f))
				if r.Error != nil || len(r.Result) != 36 {
					t.Fatalf("%s: subscription %d: %+v %s", shape.name, i, r.Error, r.Result)
				}
			}
		}
		heap, rss := heapMiB(), float64(testproc.RSS(t, 0))/(1<<20)
		t.Logf("%s: 400 subscriptions, filters of %d bytes (%d addresses × %d topics): heap %.1f → %.1f MiB (+%.1f, %.1f KiB each), RSS %.1f → %.1f MiB (+%.1f, %.1f KiB each)",
			shape.name, size, shape.addresses, shape.positions*shape.perPos, baseHeap, heap, heap-baseHeap, (heap-baseHeap)*1024/400,
			baseRSS, rss, rss-baseRSS, (rss-baseRSS)*1024/400)
		if got := metric(t, ts.Admin, `web3gate_websocket_subscriptions{kind="logs"}`); got != 400 {
			t.Fatalf("%s: %v logs subscriptions open, want 400", shape.name, got)
		}
		for _, w := range socks {
			_ = w.conn.Close()
			<-w.done
		}
		wait.For(t, "the subscriptions ended", func() bool {
			return metric(t, ts.Admin, `web3gate_websocket_subscriptions{kind="logs"}`) == 0
		})
		// The feed lets go of the sinks at its next round.
		wait.For(t, "the filters freed", func() bool { return heapMiB() < baseHeap+4 })
		t.Logf("%s: sockets closed: heap %.1f MiB, RSS %.1f MiB", shape.name, heapMiB(), float64(testproc.RSS(t, 0))/(1<<20))
	}
}
