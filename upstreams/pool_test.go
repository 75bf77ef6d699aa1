package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

func TestForwardRequestAndResult(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	s := startSet(t, testConfig(a), Deps{})
	p := s.dev(t)

	res, err := p.Forward(context.Background(), "echo_params", []byte(`[{"to":"0x01","data":"0x"},"latest"]`))
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if got, want := string(res), `[{"to":"0x01","data":"0x"},"latest"]`; got != want {
		t.Errorf("result = %s, want %s", got, want)
	}
	res, err = p.Forward(context.Background(), "echo_params", nil)
	if err != nil {
		t.Fatalf("Forward without params: %v", err)
	}
	if string(res) != "[]" {
		t.Errorf("params nil sent as %s, want []", res)
	}
	if probs := a.problems(); len(probs) != 0 {
		t.Errorf("node saw malformed requests: %q", probs)
	}
	if got := p.Head(); got != 100 {
		t.Errorf("Head = %d, want 100", got)
	}
	if p.ChainID() != 1337 || p.Name() != "dev" || s.Mainnet() != p {
		t.Errorf("pool identity: chain %d name %q mainnet %v", p.ChainID(), p.Name(), s.Mainnet() == p)
	}
	if got := s.metricValue(t, "web3gate_upstream_requests_total",
		map[string]string{"chain": "dev", "node": "dev-0", "method": "other", "outcome": "ok"}); got != 2 {
		t.Errorf("requests_total{method=other,outcome=ok} = %v, want 2", got)
	}
	if got := s.metricValue(t, "web3gate_upstream_head_block", map[string]string{"chain": "dev", "node": "dev-0"}); got != 100 {
		t.Errorf("head_block = %v, want 100", got)
	}
	if got := s.metricValue(t, "web3gate_upstream_healthy", map[string]string{"chain": "dev", "node": "dev-0"}); got != 1 {
		t.Errorf("healthy = %v, want 1", got)
	}
}

func TestForwardResultIsCallersCopy(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	p := startSet(t, testConfig(a), Deps{}).dev(t)
	first, err := p.Forward(context.Background(), "eth_getBalance", nil)
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	kept := append([]byte(nil), first...)
	for range 20 {
		if _, err := p.Forward(context.Background(), "echo_params", []byte(`["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]`)); err != nil {
			t.Fatalf("Forward: %v", err)
		}
	}
	if !bytes.Equal(first, kept) {
		t.Errorf("result changed after later calls: %s, was %s", first, kept)
	}
}

func TestLaggingNodeSkipped(t *testing.T) {
	ahead := newFakeNode(t, "ahead", 1337, 100)
	behind := newFakeNode(t, "behind", 1337, 90) // 10 blocks behind, maxLag 5
	s := startSet(t, testConfig(behind, ahead), Deps{})
	p := s.dev(t)

	results, failed := forwardN(t, p, 20)
	if failed != 0 {
		t.Fatalf("%d reads failed", failed)
	}
	for _, r := range results {
		if r != `"ahead"` {
			t.Fatalf("a read was served by %s", r)
		}
	}
	if got := behind.countReads(); got != 0 {
		t.Errorf("lagging node received %d reads, want 0", got)
	}
	st := status(t, p, "dev-0")
	if st.Lag != 10 || st.Healthy {
		t.Errorf("lagging node status = %+v, want lag 10 and not healthy", st)
	}

	// With the node in range failing, the lagging node serves rather than nothing.
	ahead.setReads(answer500)
	results, failed = forwardN(t, p, 5)
	if failed != 0 {
		t.Fatalf("%d reads failed with a lagging node available", failed)
	}
	if results[0] != `"behind"` {
		t.Errorf("read served by %s, want the lagging node", results[0])
	}
}

// TestFailover makes the preferred node (highest head) fail in each way in turn; every read
// must still succeed, served by the other node.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  behaviour
		outcome string
	}{
		{"http 500", answer500, "http_error"},
		{"http 503", answer503, "http_error"},
		{"http 429", answer429, "http_error"},
		{"garbage body", answerGarbage, "bad_response"},
		{"wrong response id", answerWrongID, "bad_response"},
		{"connection closed", answerHijack, "transport_error"},
		{"hang past the timeout", answerHang, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := newFakeNode(t, "bad", 1337, 101)
			good := newFakeNode(t, "good", 1337, 100)
			bad.setReads(tc.answer)
			s := startSet(t, testConfig(bad, good), Deps{})
			p := s.dev(t)

			results, failed := forwardN(t, p, 8)
			if failed != 0 {
				t.Fatalf("%d of 8 reads failed", failed)
			}
			for _, r := range results {
				if r != `"good"` {
					t.Fatalf("read served by %s", r)
				}
			}
			if bad.countReads() == 0 {
				t.Fatal("the failing node was never tried: the test proves nothing")
			}
			if got := s.metricValue(t, "web3gate_upstream_requests_total", map[string]string{
				"chain": "dev", "node": "dev-0", "method": "eth_getBalance", "outcome": tc.outcome,
			}); got < 1 {
				t.Errorf("requests_total{outcome=%s} of the failing node = %v, want >= 1", tc.outcome, got)
			}
			if st := status(t, p, "dev-0"); st.EjectedUntil.IsZero() || st.Healthy {
				t.Errorf("failing node after %d failures: %+v, want ejected", bad.countReads(), st)
			}
		})
	}
}

func TestSingleNodeRetriedAfterBackoff(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	p := startSet(t, testConfig(a), Deps{}).dev(t)
	a.failN.Store(2)
	res, err := p.Forward(context.Background(), "eth_getBalance", nil)
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if string(res) != `"a"` {
		t.Errorf("result = %s", res)
	}
	if got := a.count("eth_getBalance"); got != 3 {
		t.Errorf("node received %d attempts, want 3", got)
	}
}

func TestUpstreamErrorPassedThrough(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer behaviour
	}{
		{"in HTTP 200", answerRPCError},
		{"in HTTP 400", answerHTTP400RPCError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeNode(t, "a", 1337, 101)
			b := newFakeNode(t, "b", 1337, 100)
			a.setReads(tc.answer)
			p := startSet(t, testConfig(a, b), Deps{}).dev(t)

			_, err := p.Forward(context.Background(), "eth_call", []byte(`[{"to":"0x01"},"latest"]`))
			e := asError[*jsonrpc.Error](t, err)
			if e.Code != rpcErrorCode || e.Message != rpcErrorMessage || e.Status() != http.StatusOK {
				t.Errorf("error = code %d message %q status %d", e.Code, e.Message, e.Status())
			}
			data, ok := e.Data.(json.RawMessage)
			if !ok || string(data) != rpcErrorData {
				t.Errorf("data = %#v, want raw %s", e.Data, rpcErrorData)
			}
			if errors.Is(err, jsonrpc.ErrUpstreamUnavailable) || errors.Is(err, jsonrpc.ErrUpstreamTimeout) {
				t.Errorf("upstream error mistaken for a gateway error: %v", err)
			}
			if got := a.count("eth_call"); got != 1 {
				t.Errorf("node answering the error got %d attempts, want 1", got)
			}
			if got := b.count("eth_call"); got != 0 {
				t.Errorf("other node got %d attempts, want 0", got)
			}
			if st := status(t, p, "dev-0"); st.Failures != 0 || !st.Healthy {
				t.Errorf("an error answer counted against the node: %+v", st)
			}

			// The error is the caller's: later calls reusing buffers must not change it.
			a.setReads(answerOK)
			for range 10 {
				p.Forward(context.Background(), "echo_params", []byte(`["`+strings.Repeat("z", 300)+`"]`))
			}
			if data, _ := e.Data.(json.RawMessage); e.Message != rpcErrorMessage || string(data) != rpcErrorData {
				t.Errorf("error changed after later calls: %q %s", e.Message, data)
			}
		})
	}
}

func TestAllFailing(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	b := newFakeNode(t, "b", 1337, 100)
	cfg := testConfig(a, b)
	cfg.EjectAfter = 100
	p := startSet(t, cfg, Deps{}).dev(t)
	a.setReads(answer500)
	b.setReads(answerGarbage)

	_, err := p.Forward(context.Background(), "eth_getBalance", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
	}
	e := asError[*jsonrpc.Error](t, err)
	if e.Code != -32011 || e.Status() != http.StatusServiceUnavailable {
		t.Errorf("error = code %d status %d", e.Code, e.Status())
	}
	if got := a.countReads() + b.countReads(); got != cfg.MaxAttempts {
		t.Errorf("attempts = %d, want maxAttempts %d", got, cfg.MaxAttempts)
	}
}

func TestNoVerifiedNode(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	a.setChecks(answer503)
	p := startSet(t, testConfig(a), Deps{}).dev(t)
	_, err := p.Forward(context.Background(), "eth_getBalance", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
	}
	if got := a.countReads(); got != 0 {
		t.Errorf("unverified node received %d reads", got)
	}
}

func TestHangIsTimeout(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	cfg := testConfig(a)
	cfg.Timeout = 200 * time.Millisecond
	cfg.MaxAttempts = 2
	p := startSet(t, cfg, Deps{}).dev(t)
	a.setReads(answerHang)

	start := time.Now()
	_, err := p.Forward(context.Background(), "eth_getBalance", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamTimeout) {
		t.Fatalf("err = %v, want ErrUpstreamTimeout", err)
	}
	if e := asError[*jsonrpc.Error](t, err); e.Code != -32002 || e.Status() != http.StatusGatewayTimeout {
		t.Errorf("error = code %d status %d", e.Code, e.Status())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Forward took %v for 2 attempts of 200ms", d)
	}
	if got := a.countReads(); got != 2 {
		t.Errorf("attempts = %d, want 2", got)
	}
}

func TestContextDeadline(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	cfg := testConfig(a)
	cfg.Timeout = 5 * time.Second
	p := startSet(t, cfg, Deps{}).dev(t)
	a.setReads(answerHang)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Forward(ctx, "eth_getBalance", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamTimeout) {
		t.Fatalf("err = %v, want ErrUpstreamTimeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Forward took %v with a 100ms deadline", d)
	}
	if st := status(t, p, "dev-0"); st.Failures != 0 {
		t.Errorf("the caller's deadline counted against the node: %+v", st)
	}
}

func TestContextCanceled(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	cfg := testConfig(a)
	cfg.Timeout = 5 * time.Second
	p := startSet(t, cfg, Deps{}).dev(t)
	t.Cleanup(a.close) // before Close: Close waits for the abandoned exchange
	a.setReads(answerHang)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := p.Forward(ctx, "eth_getBalance", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Forward took %v after cancel at 50ms", d)
	}
	if st := status(t, p, "dev-0"); st.Failures != 0 {
		t.Errorf("cancellation counted against the node: %+v", st)
	}
	// The abandoned exchange must not disturb the next one.
	a.setReads(answerOK)
	if res, err := p.Forward(context.Background(), "eth_getBalance", nil); err != nil || string(res) != `"a"` {
		t.Errorf("next Forward = %s, %v", res, err)
	}
}

func TestResponseTooLarge(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 101)
	b := newFakeNode(t, "b", 1337, 100)
	cfg := testConfig(a, b)
	cfg.MaxResponseBytes = bigResultBytes / 2
	p := startSet(t, cfg, Deps{}).dev(t)
	a.setReads(answerBig)
	b.setReads(answerBig)

	_, err := p.Forward(context.Background(), "eth_getLogs", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
	}
	if got := a.countReads() + b.countReads(); got != 1 {
		t.Errorf("attempts = %d, want 1 (no node would do better)", got)
	}
	if st := status(t, p, "dev-0"); st.Failures != 0 {
		t.Errorf("our size limit counted against the node: %+v", st)
	}
}

func TestForwardAfterClose(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	s := startSet(t, testConfig(a), Deps{})
	s.Close()
	s.Close()
	_, err := s.dev(t).Forward(context.Background(), "eth_getBalance", nil)
	if !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Fatalf("err = %v, want ErrUpstreamUnavailable", err)
	}
}

func TestForwardBatch(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	s := startSet(t, testConfig(a), Deps{})
	p := s.dev(t)
	calls := []BatchCall{
		{Method: "echo_params", Params: []byte(`["x",1]`)},
		{Method: "fail_me"},
		{Method: "eth_getBalance"},
	}
	res, err := p.ForwardBatch(context.Background(), calls)
	if err != nil {
		t.Fatalf("ForwardBatch: %v", err)
	}
	if len(res) != 3 || string(res[0].Result) != `["x",1]` || res[0].Err != nil ||
		res[1].Result != nil || res[1].Err == nil || res[1].Err.Code != rpcErrorCode ||
		string(res[2].Result) != `"a"` {
		t.Fatalf("results = %+v", res)
	}
	if got := a.count("batch"); got != 1 {
		t.Errorf("node got %d batch requests, want 1 (one round trip)", got)
	}
	if probs := a.problems(); len(probs) != 0 {
		t.Errorf("node saw malformed requests: %q", probs)
	}
	if res, err := p.ForwardBatch(context.Background(), nil); res != nil || err != nil {
		t.Errorf("empty batch = %v, %v", res, err)
	}
}

func TestForwardBatchFailsOverOnIncompleteAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer behaviour
	}{
		{"one response missing", answerWrongID},
		{"http 503", answer503},
		{"garbage body", answerGarbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := newFakeNode(t, "bad", 1337, 101)
			good := newFakeNode(t, "good", 1337, 100)
			bad.setReads(tc.answer)
			p := startSet(t, testConfig(bad, good), Deps{}).dev(t)
			res, err := p.ForwardBatch(context.Background(), []BatchCall{{Method: "eth_call"}, {Method: "eth_getCode"}})
			if err != nil {
				t.Fatalf("ForwardBatch: %v", err)
			}
			if string(res[0].Result) != `"good"` || string(res[1].Result) != `"good"` {
				t.Errorf("results %s, %s: want both from the good node", res[0].Result, res[1].Result)
			}
			if bad.count("batch") == 0 {
				t.Error("the failing node was never tried: the test proves nothing")
			}
		})
	}
}
