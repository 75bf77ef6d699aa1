package integration

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes each export
// (protobuf) and keeps its spans.
type otlpReceiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []*span
	exports int
	headers []http.Header // of each export
}

// span is one received span, its ids in hex and its attributes as strings.
type span struct {
	trace, id, parent string
	name              string
	kind              tracepb.Span_SpanKind
	status            tracepb.Status_StatusCode
	attrs             map[string]string
	service           string // the resource's service.name
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []*span
	for _, rs := range export.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, &span{
					trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
					parent: hex.EncodeToString(s.ParentSpanId), name: s.Name, kind: s.Kind,
					status: s.GetStatus().GetCode(), attrs: attrs(s.Attributes), service: service,
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.exports++
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(v.DoubleValue)
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}

// trace is the spans received of the trace id.
func (r *otlpReceiver) trace(id string) []*span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*span
	for _, s := range r.spans {
		if s.trace == id {
			out = append(out, s)
		}
	}
	return out
}

func (r *otlpReceiver) all() []*span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*span(nil), r.spans...)
}

// awaitSpan waits until the trace has a span named name, and returns the trace's spans.
func (r *otlpReceiver) awaitSpan(t *testing.T, trace, name string) []*span {
	t.Helper()
	var spans []*span
	wait.For(t, "span "+name+" of trace "+trace, func() bool {
		spans = r.trace(trace)
		return named(spans, name) != nil
	})
	return spans
}

// named is the first of spans named name, nil when none is.
func named(spans []*span, name string) *span {
	for _, s := range spans {
		if s.name == name {
			return s
		}
	}
	return nil
}

// only is the one span of spans named name; more or fewer fail the test.
func only(t *testing.T, spans []*span, name string) *span {
	t.Helper()
	var found []*span
	for _, s := range spans {
		if s.name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %s", len(found), name, describe(spans))
	}
	return found[0]
}

// childOf fails the test unless child's parent is parent, in parent's trace.
func childOf(t *testing.T, child, parent *span) {
	t.Helper()
	if child.trace != parent.trace || child.parent != parent.id {
		t.Errorf("span %q (trace %s, parent %s) is not a child of %q (trace %s, id %s)",
			child.name, child.trace, child.parent, parent.name, parent.trace, parent.id)
	}
}

func describe(spans []*span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "\n  %s id=%s parent=%s %v", s.name, s.id, s.parent, s.attrs)
	}
	return b.String()
}

// tracedUpstream is a fake upstream node that records, per method, the traceparent header
// of each request it receives ("" for none).
type tracedUpstream struct {
	*fakeUpstream
	srv *httptest.Server

	mu      sync.Mutex
	parents map[string][]string
}

func newTracedUpstream(t *testing.T) *tracedUpstream {
	u := &tracedUpstream{fakeUpstream: newFakeUpstream(t, 1), parents: map[string][]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		m := gjson.GetBytes(body, "method").Str
		u.parents[m] = append(u.parents[m], r.Header.Get("traceparent"))
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.serve(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *tracedUpstream) traceparents(method string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.parents[method]...)
}

// nodeKey stands for an API key in a provider's URL: it must never reach a span.
const nodeKey = "n0de-api-k3y"

// tracingConfig is upstreamConfig with tracing on, exporting to recv every 50ms.
func tracingConfig(recv *otlpReceiver, node *tracedUpstream, extra string) string {
	return upstreamConfig(fmt.Sprintf("tracing: {enabled: true, endpoint: %q, interval: 50ms, headers: {X-Collector-Auth: collector-s3cret}%s}\n",
		recv.srv.URL, extra), node.srv.URL+"/v2/"+nodeKey)
}

const (
	incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpan  = "00f067aa0ba902b7"
)

// TestTracingForwardedCall: a forwarded read is one trace, server span → stage spans →
// upstream.forward → upstream.attempt, and the upstream node receives the attempt's
// traceparent; the caller's traceparent parents the server span; a batch has one span per
// call; nothing secret is in any span.
func TestTracingForwardedCall(t *testing.T) {
	recv := newOTLPReceiver(t)
	node := newTracedUpstream(t)
	node.result("eth_getBalance", `"0x10"`)
	// The finality poll's blocks: with the finalized block known, a balance at block 1 is
	// cached.
	node.result("eth_getBlockByNumber", `{"number":"0x64","hash":"0x`+strings.Repeat("11", 32)+`"}`)
	var log lockedLog
	ts := startServerIn(t, tracingConfig(recv, node, ""), t.TempDir(), &log)
	url := ts.API + "/v1/web3/mainnet"
	wait.For(t, "the finalized block", func() bool {
		return metric(t, ts.Admin, `web3gate_upstream_finality_block{block="finalized",chain="one"}`) > 0
	})

	t.Run("incoming traceparent", func(t *testing.T) {
		status, hdr, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","0x1"]}`,
			"traceparent", "00-"+incomingTrace+"-"+incomingSpan+"-01")
		if status != http.StatusOK || !strings.Contains(string(body), `"result":"0x10"`) {
			t.Fatalf("HTTP %d %s", status, body)
		}
		spans := recv.awaitSpan(t, incomingTrace, "upstream.attempt")
		server := only(t, spans, "POST /v1/web3/mainnet")
		if server.parent != incomingSpan || server.kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("server span: parent %s kind %v, want the caller's span %s, server", server.parent, server.kind, incomingSpan)
		}
		for k, want := range map[string]string{
			"rpc.system": "jsonrpc", "rpc.method": "eth_getBalance", "web3gate.route": "mainnet",
			"http.route": "/v1/web3/mainnet", "http.request.method": "POST", "http.response.status_code": "200",
			"web3gate.request_id": hdr.Get("X-Request-Id"), "web3gate.client": proxy.ClientFingerprint("test-client"),
			"web3gate.chain_id": "1",
		} {
			if got := server.attrs[k]; got != want {
				t.Errorf("server span %s = %q, want %q", k, got, want)
			}
		}
		if server.service != "web3gate" {
			t.Errorf("service.name %q", server.service)
		}
		auth := only(t, spans, "auth")
		childOf(t, auth, server)
		cache := only(t, spans, "cache")
		childOf(t, cache, server)
		if cache.attrs["web3gate.cache.hit"] != "false" {
			t.Errorf("cache span: hit %q on a first call", cache.attrs["web3gate.cache.hit"])
		}
		forward := only(t, spans, "upstream.forward")
		childOf(t, forward, cache)
		attempt := only(t, spans, "upstream.attempt")
		childOf(t, attempt, forward)
		for k, want := range map[string]string{
			"web3gate.upstream.node": "one-0", "web3gate.chain": "one", "server.address": "127.0.0.1",
			"web3gate.upstream.attempt": "1", "web3gate.upstream.hedge": "false", "http.response.status_code": "200",
			"web3gate.upstream.outcome": "ok", "rpc.method": "eth_getBalance",
		} {
			if got := attempt.attrs[k]; got != want {
				t.Errorf("attempt span %s = %q, want %q", k, got, want)
			}
		}
		if attempt.kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("attempt span kind %v", attempt.kind)
		}
		// The node received the attempt's traceparent: this trace, the attempt's span, sampled.
		want := "00-" + incomingTrace + "-" + attempt.id + "-01"
		if got := node.traceparents("eth_getBalance"); len(got) != 1 || got[0] != want {
			t.Errorf("the node received traceparents %q, want [%q]", got, want)
		}

		// The same read again: answered by the cache, no upstream span.
		post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","0x1"]}`,
			"traceparent", "00-"+strings.Repeat("ab", 16)+"-"+incomingSpan+"-01")
		spans = recv.awaitSpan(t, strings.Repeat("ab", 16), "POST /v1/web3/mainnet")
		if c := only(t, spans, "cache"); c.attrs["web3gate.cache.hit"] != "true" {
			t.Errorf("second read: cache hit %q; spans %s", c.attrs["web3gate.cache.hit"], describe(spans))
		}
		if named(spans, "upstream.forward") != nil {
			t.Errorf("a cache hit has an upstream span: %s", describe(spans))
		}
	})

	t.Run("new trace", func(t *testing.T) {
		status, hdr, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000bb","latest"]}`)
		if status != http.StatusOK {
			t.Fatalf("HTTP %d %s", status, body)
		}
		reqID := hdr.Get("X-Request-Id")
		var server *span
		wait.For(t, "the server span of "+reqID, func() bool {
			for _, s := range recv.all() {
				if s.attrs["web3gate.request_id"] == reqID {
					server = s
					return true
				}
			}
			return false
		})
		if server.parent != "" {
			t.Errorf("server span of a request without traceparent has the parent %s", server.parent)
		}
		spans := recv.awaitSpan(t, server.trace, "upstream.attempt")
		attempt := only(t, spans, "upstream.attempt")
		want := "00-" + server.trace + "-" + attempt.id + "-01"
		if got := node.traceparents("eth_getBalance"); len(got) != 2 || got[1] != want {
			t.Errorf("the node received traceparents %q, want the second %q", got, want)
		}
	})

	t.Run("batch", func(t *testing.T) {
		trace := strings.Repeat("cd", 16)
		status, _, body := post(t, url, `[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000cc","latest"]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`,
			"traceparent", "00-"+trace+"-"+incomingSpan+"-01")
		if status != http.StatusOK {
			t.Fatalf("HTTP %d %s", status, body)
		}
		spans := recv.awaitSpan(t, trace, "upstream.attempt")
		wait.For(t, "the server span of the batch", func() bool {
			spans = recv.trace(trace)
			return named(spans, "POST /v1/web3/mainnet") != nil
		})
		server := only(t, spans, "POST /v1/web3/mainnet")
		if server.attrs["web3gate.rpc.batch_size"] != "2" || server.attrs["rpc.method"] != "" {
			t.Errorf("batch server span attributes %v", server.attrs)
		}
		balance, chainID := only(t, spans, "eth_getBalance"), only(t, spans, "eth_chainId")
		childOf(t, balance, server)
		childOf(t, chainID, server)
		childOf(t, only(t, spans, "auth"), server) // once per exchange
		childOf(t, only(t, spans, "cache"), balance)
		childOf(t, only(t, spans, "upstream.forward"), only(t, spans, "cache"))
	})

	t.Run("websocket message", func(t *testing.T) {
		w, resp := dialWS(t, ts, "/v1/web3/mainnet", http.Header{"X-Api-Key": {"test-client"}, "Authorization": {"Bearer test-token"}})
		if r := w.call(t, "eth_getBalance", "0x00000000000000000000000000000000000000dd", "latest"); r.Error != nil {
			t.Fatalf("eth_getBalance: %+v", r.Error)
		}
		socket := resp.Header.Get("X-Request-Id")
		var msg *span
		wait.For(t, "the span of the message", func() bool {
			for _, s := range recv.all() {
				if s.name == "WS /v1/web3/mainnet" && s.attrs["web3gate.socket"] == socket {
					msg = s
					return true
				}
			}
			return false
		})
		if msg.parent != "" || msg.kind != tracepb.Span_SPAN_KIND_SERVER || msg.attrs["rpc.method"] != "eth_getBalance" {
			t.Errorf("message span: parent %q kind %v attributes %v", msg.parent, msg.kind, msg.attrs)
		}
		spans := recv.awaitSpan(t, msg.trace, "upstream.attempt")
		childOf(t, only(t, spans, "upstream.forward"), only(t, spans, "cache"))
		childOf(t, only(t, spans, "cache"), msg)
	})

	// Nothing secret in any span: not the node URL's key, the client id, the token.
	for _, s := range recv.all() {
		for k, v := range s.attrs {
			for _, secret := range []string{nodeKey, "test-client", "test-token", "/v2/"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s = %q holds %q", s.name, k, v, secret)
				}
			}
		}
	}
	recv.mu.Lock()
	for _, h := range recv.headers {
		if h.Get("X-Collector-Auth") != "collector-s3cret" {
			t.Errorf("an export without tracing.headers: %v", h)
		}
	}
	recv.mu.Unlock()
	ts.stop()
	if strings.Contains(log.String(), "collector-s3cret") {
		t.Errorf("the log shows the collector's header:\n%s", log.String())
	}
}

// TestTracingSend: eth_sendTransaction on the dev chain is one trace, server span → auth,
// sign → txmgr.send → check, reserve, sign, persist, broadcast → upstream.forward of
// eth_sendRawTransaction → its attempt.
func TestTracingSend(t *testing.T) {
	recv := newOTLPReceiver(t)
	cfg := devConfig(t)
	for old, repl := range map[string]string{
		"  enabled: false\n  # The OTLP/HTTP receiver": "  enabled: true\n  # The OTLP/HTTP receiver",
		`  endpoint: "http://127.0.0.1:4318"`:          fmt.Sprintf("  endpoint: %q", recv.srv.URL),
		"  interval: 5s\n":                             "  interval: 50ms\n",
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("config.yaml changed: %q not found in the tracing section", old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	ts := startServer(t, cfg)
	trace := strings.Repeat("5e", 16)
	r := rpcCall(t, http.DefaultClient, ts.API+"/v1/web3/mainnet", "eth_sendTransaction", []any{transfer(devAccount3, 1)},
		"traceparent", "00-"+trace+"-"+incomingSpan+"-01")
	if r.Error != nil {
		t.Fatalf("eth_sendTransaction: %+v", r.Error)
	}
	var hash string
	if err := json.Unmarshal(r.Result, &hash); err != nil {
		t.Fatal(err)
	}
	spans := recv.awaitSpan(t, trace, "txmgr.send")
	wait.For(t, "the server span of the send", func() bool {
		spans = recv.trace(trace)
		return named(spans, "POST /v1/web3/mainnet") != nil
	})
	server := only(t, spans, "POST /v1/web3/mainnet")
	if server.parent != incomingSpan || server.attrs["rpc.method"] != "eth_sendTransaction" {
		t.Errorf("server span: parent %s, attributes %v", server.parent, server.attrs)
	}
	childOf(t, only(t, spans, "auth"), server)
	sign := only(t, spans, "sign")
	childOf(t, sign, server)
	send := only(t, spans, "txmgr.send")
	childOf(t, send, sign)
	if send.attrs["web3gate.tx.hash"] != hash {
		t.Errorf("txmgr.send hash %q, want %q", send.attrs["web3gate.tx.hash"], hash)
	}
	for _, name := range []string{"txmgr.check", "txmgr.reserve", "txmgr.sign", "txmgr.persist", "txmgr.broadcast"} {
		childOf(t, only(t, spans, name), send)
	}
	if got := only(t, spans, "txmgr.reserve").attrs["web3gate.tx.from"]; !strings.EqualFold(got, devAccount3.Hex()) {
		t.Errorf("txmgr.reserve from %q, want %s", got, devAccount3.Hex())
	}
	broadcast := only(t, spans, "txmgr.broadcast")
	var forward *span
	for _, s := range spans {
		if s.name == "upstream.forward" && s.parent == broadcast.id {
			forward = s
		}
	}
	if forward == nil || forward.attrs["rpc.method"] != "eth_sendRawTransaction" {
		t.Fatalf("no upstream.forward of eth_sendRawTransaction under txmgr.broadcast: %s", describe(spans))
	}
	var attempts int
	for _, s := range spans {
		if s.name == "upstream.attempt" && s.parent == forward.id {
			attempts++
			if s.attrs["web3gate.upstream.node"] != "embedded" || s.attrs["web3gate.upstream.outcome"] != "ok" {
				t.Errorf("broadcast attempt attributes %v", s.attrs)
			}
		}
	}
	if attempts != 1 {
		t.Errorf("%d attempts of the broadcast, want 1: %s", attempts, describe(spans))
	}
	// The upstream reads of the checks are spans of txmgr.check.
	check := only(t, spans, "txmgr.check")
	reads := 0
	for _, s := range spans {
		if s.name == "upstream.forward" && s.parent == check.id {
			reads++
		}
	}
	if reads == 0 {
		t.Errorf("no upstream read under txmgr.check: %s", describe(spans))
	}
	for _, s := range spans {
		for k, v := range s.attrs {
			if strings.Contains(v, "dev-access-token") || strings.Contains(v, "web3gate-dev") {
				t.Errorf("span %s attribute %s = %q holds a credential", s.name, k, v)
			}
		}
	}
}

// TestTracingOff: with tracing.enabled false (an endpoint set all the same) nothing is
// exported and the upstream receives no traceparent, not even the caller's; with
// sampleRatio 0 nothing is exported either, but the upstream receives the request's
// trace id marked not sampled, so the services behind it make the same decision.
func TestTracingOff(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		recv := newOTLPReceiver(t)
		node := newTracedUpstream(t)
		node.result("eth_getBalance", `"0x10"`)
		cfg := strings.Replace(tracingConfig(recv, node, ""), "tracing: {enabled: true", "tracing: {enabled: false", 1)
		ts := startServer(t, cfg)
		status, _, body := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","0x1"]}`,
			"traceparent", "00-"+incomingTrace+"-"+incomingSpan+"-01")
		if status != http.StatusOK {
			t.Fatalf("HTTP %d %s", status, body)
		}
		ts.stop() // a provider would flush its spans at its stop
		if got := node.traceparents("eth_getBalance"); len(got) != 1 || got[0] != "" {
			t.Errorf("the node received traceparents %q, want one request without", got)
		}
		for _, tp := range node.traceparents("eth_chainId") {
			if tp != "" {
				t.Errorf("a poll carried the traceparent %q", tp)
			}
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if recv.exports != 0 {
			t.Errorf("%d exports with tracing off: %s", recv.exports, describe(recv.spans))
		}
	})
	t.Run("not sampled", func(t *testing.T) {
		recv := newOTLPReceiver(t)
		node := newTracedUpstream(t)
		node.result("eth_getBalance", `"0x10"`)
		ts := startServer(t, tracingConfig(recv, node, ", sampleRatio: 0"))
		status, _, body := post(t, ts.API+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}`)
		if status != http.StatusOK {
			t.Fatalf("HTTP %d %s", status, body)
		}
		ts.stop()
		got := node.traceparents("eth_getBalance")
		if len(got) != 1 || len(got[0]) != 55 || !strings.HasPrefix(got[0], "00-") || !strings.HasSuffix(got[0], "-00") {
			t.Errorf("the node received traceparents %q, want one marked not sampled (flags 00)", got)
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if len(recv.spans) != 0 {
			t.Errorf("spans exported at sampleRatio 0: %s", describe(recv.spans))
		}
	})
}
