//go:build linux

package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkHandleLocalTraced is BenchmarkHandleLocal with tracing on, every trace recorded
// (sample=1: a server span and an auth span per request, exported in batches to a receiver
// on loopback that discards them) or none (sample=0: the unsampled server span only); the
// difference with BenchmarkHandleLocal is tracing's cost per request (docs/performance.md,
// "Tracing").
func BenchmarkHandleLocalTraced(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	for _, ratio := range []string{"1", "0"} {
		b.Run("sample="+ratio, func(b *testing.B) {
			benchChainID(b, fmt.Sprintf("rateLimit: {enabled: false}\ntracing: {enabled: true, endpoint: %q, sampleRatio: %s}\n", sink.URL, ratio), "")
		})
	}
}

// BenchmarkHandleForwardTraced forwards an uncacheable read to a loopback node, one request
// at a time, with tracing off (the baseline), on with every trace recorded (sample=1: the
// server, auth, forward and attempt spans, and the upstream request's traceparent) and on
// with none (sample=0: the unsampled server span and the traceparent).
func BenchmarkHandleForwardTraced(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	url := constNode(b, 1)
	for _, ratio := range []string{"off", "1", "0"} {
		name, tracing := "sample="+ratio, fmt.Sprintf("tracing: {enabled: true, endpoint: %q, sampleRatio: %s}\n", sink.URL, ratio)
		if ratio == "off" {
			name, tracing = "off", ""
		}
		b.Run(name, func(b *testing.B) {
			h := benchHandler(b, upstreamConfig("cache: {enabled: false, coalesce: false}\nrateLimit: {enabled: false}\n"+tracing, url))
			req := benchRequest(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","latest"]}`)
			b.ReportAllocs()
			var ctx fasthttp.RequestCtx
			ctx.Init(req, nil, nil)
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("%d %s", ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
		})
	}
}
