//go:build unix

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/internal/testengine"
)

// BenchmarkHandleLocal measures the whole public handler, auth to response, on a locally
// answered eth_chainId: web3gate's own cost per request without sockets (and without the
// rate-limit stage: BenchmarkHandleRateLimited adds it).
func BenchmarkHandleLocal(b *testing.B) {
	benchChainID(b, "rateLimit: {enabled: false}\n", "")
}

// BenchmarkHandleRateLimited is BenchmarkHandleLocal with the rate-limit stage charging each
// call a unit of a budget it never spends (eth_chainId costs 1 here): the stage's own cost
// per request is the difference between the two.
func BenchmarkHandleRateLimited(b *testing.B) {
	benchChainID(b, "rateLimit: {costs: {eth_chainId: 1}, client: {rate: 1e9, burst: 1000000000}, principal: {rate: 1e9, burst: 1000000000}}\n", "1000000000")
}

// benchRequest is a POST of body to /v1/web3/mainnet with the test client's credentials.
func benchRequest(body string) *fasthttp.Request {
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI("/v1/web3/mainnet")
	req.Header.SetContentType("application/json")
	req.Header.Set("X-API-Key", "test-client")
	req.Header.Set("Authorization", "Bearer test-token")
	req.SetBodyString(body)
	return &req
}

// benchChainID runs the handler of the config with extra on a locally answered eth_chainId,
// after checking one answer (and its RateLimit-Limit header: empty for none).
func benchChainID(b *testing.B, extra, rateLimit string) {
	h := benchHandler(b, upstreamConfig(extra, "http://127.0.0.1:9"))
	req := benchRequest(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
	var ctx fasthttp.RequestCtx
	ctx.Init(req, nil, nil)
	h(&ctx)
	if got := string(ctx.Response.Body()); got != `{"jsonrpc":"2.0","id":1,"result":"0x1"}` {
		b.Fatalf("response %s", got)
	}
	if got := string(ctx.Response.Header.Peek("RateLimit-Limit")); got != rateLimit {
		b.Fatalf("RateLimit-Limit %q, want %q", got, rateLimit)
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h(&ctx)
	}
}

// constNode is a fasthttp JSON-RPC node on loopback answering every request with result.
func constNode(b *testing.B, chainID uint64) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	chain := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%%s,"result":"0x%x"}`, chainID))
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		id := gjson.GetBytes(ctx.PostBody(), "id").Raw
		if gjson.GetBytes(ctx.PostBody(), "method").Str == "eth_chainId" {
			ctx.SetBodyString(fmt.Sprintf(string(chain), id))
			return
		}
		ctx.SetBodyString(`{"jsonrpc":"2.0","id":` + id + `,"result":"0x21e19e0c9bab2400000"}`)
	}}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

// BenchmarkHandleForward measures the public handler forwarding an uncacheable read to a
// loopback node; BenchmarkDirectNode is the same node asked directly, the baseline.
func BenchmarkHandleForward(b *testing.B) {
	url := constNode(b, 1)
	h := benchHandler(b, upstreamConfig("cache: {enabled: false, coalesce: false}\nrateLimit: {enabled: false}\n", url))
	req := benchRequest(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		ctx.Init(req, nil, nil)
		for pb.Next() {
			ctx.Response.Reset()
			h(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		}
	})
}

// BenchmarkHandleRedisHit measures the public handler answering a cacheable read from
// Redis (the shared Redis at 127.0.0.1:6379): no in-process level, no coalescing, so each
// call is one Redis GET; compare with BenchmarkHandleLocal and BenchmarkHandleForward.
func BenchmarkHandleRedisHit(b *testing.B) {
	url, prefix := testengine.Redis(b)
	h := benchHandler(b, upstreamConfig(fmt.Sprintf("cache: {local: false, coalesce: false}\nredis: {url: %q, keyPrefix: %q, timeout: 1s}\nrateLimit: {enabled: false}\n", url, prefix), constNode(b, 1)))
	req := benchRequest(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByHash","params":["0x4869b05f6c5e2e4fa85bdc02cb8e0fd1e2a5bbc3ad4ba7aa2b1a79e27e1c3a10",false]}`)
	var ctx fasthttp.RequestCtx
	ctx.Init(req, nil, nil)
	for ctx.Response.StatusCode() != 200 || len(testRedisKeys(b, prefix)) == 0 {
		ctx.Response.Reset()
		h(&ctx) // the first call fills Redis in the background
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportAllocs()
	// 32 calls at once, as the bench's 32 connections: their GETs share Redis round trips.
	b.SetParallelism(16)
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		var ctx fasthttp.RequestCtx
		ctx.Init(req, nil, nil)
		for pb.Next() {
			ctx.Response.Reset()
			h(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		}
	})
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// processCPU is the test process's CPU time so far (user and system): what a call costs
// web3gate, whatever else the machine runs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func testRedisKeys(b *testing.B, prefix string) []string {
	keys, err := testengine.RedisKeys(testengine.RedisAddr(), prefix)
	if err != nil {
		b.Fatal(err)
	}
	return keys
}

func BenchmarkDirectNode(b *testing.B) {
	url := constNode(b, 1)
	hc := &fasthttp.HostClient{Addr: strings.TrimPrefix(url, "http://"), MaxConns: 512}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var req fasthttp.Request
		var resp fasthttp.Response
		for pb.Next() {
			req.Header.SetMethod("POST")
			req.SetRequestURI(url + "/")
			req.Header.SetContentType("application/json")
			req.SetBodyString(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}`)
			if err := hc.Do(&req, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchHandler starts a server on cfgText and returns its public handler, to serve
// requests without a socket.
func benchHandler(b *testing.B, cfgText string) fasthttp.RequestHandler {
	b.Helper()
	a, err := app.New(testConfig(b, cfgText, b.TempDir()), app.Options{Version: "bench", Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Stop)
	return a.Handler()
}
