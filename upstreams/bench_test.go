package upstreams

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// benchNode is a fasthttp server answering every JSON-RPC call without allocating, so that
// the allocations reported by the benchmarks are Forward's own (the server shares the
// process).
func benchNode(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{NoDefaultDate: true, MaxIdleWorkerDuration: 50 * time.Millisecond, Handler: func(ctx *fasthttp.RequestCtx) {
		body := ctx.PostBody()
		s := bytesToString(body) // GetBytes would copy
		id := gjson.Get(s, "id")
		result := `"0x64"`
		if gjson.Get(s, "method").Str == "eth_chainId" {
			result = `"0x539"`
		}
		ctx.SetContentType("application/json")
		ctx.WriteString(`{"jsonrpc":"2.0","id":`)
		ctx.WriteString(id.Raw)
		ctx.WriteString(`,"result":`)
		ctx.WriteString(result)
		ctx.WriteString(`}`)
	}}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func benchPool(b *testing.B, urls ...string) *Pool {
	b.Helper()
	cfg := testConfig()
	cfg.Chains = []ChainConfig{{ChainID: 1337, Name: "dev", URLs: urls}}
	s, err := New(cfg, Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	s.Start(context.Background())
	p, _ := s.Pool(1337)
	return p
}

func BenchmarkPick(b *testing.B) {
	u := benchNode(b)
	p := benchPool(b, u, u+"/b", u+"/c")
	b.ReportAllocs()
	for b.Loop() {
		if p.pick(0) == nil {
			b.Fatal("no node")
		}
	}
}

var benchParams = []byte(`["0x0000000000000000000000000000000000000001","latest"]`)

// BenchmarkForward measures a whole read over loopback HTTP. "background" cannot be
// canceled and runs the exchange inline; "cancelable" runs it aside to watch ctx.
func BenchmarkForward(b *testing.B) {
	p := benchPool(b, benchNode(b))
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancelable", cctx}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Forward(bc.ctx, "eth_getBalance", benchParams); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkForwardParallel(b *testing.B) {
	p := benchPool(b, benchNode(b))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Forward(context.Background(), "eth_getBalance", benchParams); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkForwardHedge measures a read to a pool of two nodes with hedging off and on,
// nothing slow: the cost of being ready to hedge (a cancelable attempt, a timer).
func BenchmarkForwardHedge(b *testing.B) {
	u := benchNode(b)
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig()
			cfg.Chains = []ChainConfig{{ChainID: 1337, Name: "dev", URLs: []string{u, u + "/b"}}}
			cfg.Hedge = DefaultConfig().Hedge
			cfg.Hedge.Enabled = on
			s, err := New(cfg, Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.Start(context.Background())
			p, _ := s.Pool(1337)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Forward(context.Background(), "eth_getBalance", benchParams); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
