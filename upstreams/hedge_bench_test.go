package upstreams

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
)

// BenchmarkHedgedTail measures the latency of reads (eth_getBalance) to a pool of two anvil
// nodes whose proxies hold 5% of reads for 100 ms (a latency tail), with hedging off and on
// (defaults: p90, minDelay 10ms, maxExtra 0.1). It reports p50, p99 and the largest latency
// in ms, and the hedges and the extra upstream calls per read. Figures in
// docs/performance.md ("Hedged reads"); run with
//
//	go test -run '^$' -bench BenchmarkHedgedTail -benchtime 2000x ./upstreams/
func BenchmarkHedgedTail(b *testing.B) {
	for _, hedge := range []bool{false, true} {
		name := "hedge=off"
		if hedge {
			name = "hedge=on"
		}
		b.Run(name, func(b *testing.B) {
			a, c := anvil.Start(b, 31337), anvil.Start(b, 31337)
			pa, pc := newNodeProxy(b, a, 0), newNodeProxy(b, c, 0)
			for _, px := range []*nodeProxy{pa, pc} {
				px.tailP, px.tailDelay = 0.05, 100*time.Millisecond
			}
			cfg := anvilConfig(pa, pc)
			cfg.Hedge = DefaultConfig().Hedge
			cfg.Hedge.Enabled = hedge
			s := startSet(b, cfg, Deps{})
			p := s.anvilPool(b)
			wait.Within(b, 5*time.Second, "both nodes in rotation", func() bool {
				st := p.Nodes()
				return st[0].Healthy && st[1].Healthy
			})
			params := []byte(`["0x00000000000000000000000000000000000000aa","latest"]`)
			for range 200 { // warm-up: connections, latency estimates
				if _, err := p.Forward(context.Background(), "eth_getBalance", params); err != nil {
					b.Fatal(err)
				}
			}
			sent0 := pa.count("eth_getBalance") + pc.count("eth_getBalance")
			hedges0 := s.metricValue(b, "web3gate_upstream_hedges_total", map[string]string{"chain": "anvil", "outcome": "won"}) +
				s.metricValue(b, "web3gate_upstream_hedges_total", map[string]string{"chain": "anvil", "outcome": "lost"})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := p.Forward(context.Background(), "eth_getBalance", params); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			hedges := s.metricValue(b, "web3gate_upstream_hedges_total", map[string]string{"chain": "anvil", "outcome": "won"}) +
				s.metricValue(b, "web3gate_upstream_hedges_total", map[string]string{"chain": "anvil", "outcome": "lost"}) - hedges0
			b.ReportMetric(hedges/float64(b.N), "hedges/read")
			b.ReportMetric(float64(pa.count("eth_getBalance")+pc.count("eth_getBalance")-sent0)/float64(b.N)-1, "extra-calls/read")
		})
	}
}
