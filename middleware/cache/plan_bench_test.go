package cache

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/web3gate/web3gate/proxy"
)

// BenchmarkHit is a cached eth_call answered by the stage: canonical params, key, lookup.
func BenchmarkHit(b *testing.B) {
	cfg := Config{Enabled: true, Local: true, Coalesce: true}
	cfg.SetDefaults()
	s, err := New(cfg, Deps{Registry: prometheus.NewRegistry(), Finality: func(uint64) Finality { return testFinality }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := &counting{result: `"0x0000000000000000000000000000000000000000000000000000000000000001"`}
	chain := proxy.Compile(h, s)
	params := `[{"to":"` + addrCheck + `","data":"0x70a08231000000000000000000000000f39fd6e51aad88f6f4ce6ab8827279cfffb92266"},"0x10"]`
	if _, err := chain.Serve(call("eth_call", params)); err != nil {
		b.Fatal(err)
	}
	s.Wait()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chain.Serve(call("eth_call", params)); err != nil {
			b.Fatal(err)
		}
	}
	if h.n.Load() != 1 {
		b.Fatalf("%d upstream calls", h.n.Load())
	}
}
