package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func TestWriteLimit(t *testing.T) {
	var h fasthttp.ResponseHeader
	writeLimit(&h, &LimitInfo{})
	if h.Peek("RateLimit-Limit") != nil || h.Peek("Retry-After") != nil {
		t.Fatalf("no limit applied, yet headers: %s", h.String())
	}
	writeLimit(&h, &LimitInfo{Limit: 100, Remaining: 7, Reset: 3})
	if string(h.Peek("RateLimit-Limit")) != "100" || string(h.Peek("RateLimit-Remaining")) != "7" || string(h.Peek("RateLimit-Reset")) != "3" || h.Peek("Retry-After") != nil {
		t.Fatalf("allowed: %s", h.String())
	}
	writeLimit(&h, &LimitInfo{Limit: 100, Remaining: 0, Reset: 12, RetryAfter: 2})
	if string(h.Peek("RateLimit-Remaining")) != "0" || string(h.Peek("Retry-After")) != "2" || string(h.Peek("RateLimit-Reset")) != "12" {
		t.Fatalf("refused: %s", h.String())
	}
}

func BenchmarkWriteLimit(b *testing.B) {
	var h fasthttp.ResponseHeader
	l := LimitInfo{Limit: 1000000000, Remaining: 999999999, Reset: 1}
	b.ReportAllocs()
	for b.Loop() {
		h.Reset()
		h.Set("X-Request-Id", "abcdef-12")
		writeLimit(&h, &l)
	}
}
