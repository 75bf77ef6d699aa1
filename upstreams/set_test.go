package upstreams

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/internal/wait"
)

// fasthttp's HostClient closes idle connections from a goroutine that outlives them by up
// to MaxIdleConnDuration; it is fasthttp's, it ends on its own, and it holds no state of ours.
var ignoreConnsCleaner = goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, ignoreConnsCleaner)
}

// TestWrongChainNodeNeverUsed: a node on another chain at start serves no read and is asked
// nothing but eth_chainId, again at every poll.
func TestWrongChainNodeNeverUsed(t *testing.T) {
	wrong := newFakeNode(t, "wrong", 1, 200) // ahead of the good node: it would be preferred
	good := newFakeNode(t, "good", 1337, 100)
	s := startSet(t, testConfig(wrong, good), Deps{})
	p := s.dev(t)

	st := status(t, p, "dev-0")
	if !st.WrongChain || st.WrongChainID != 1 || st.Healthy || st.Verified {
		t.Fatalf("wrong-chain node status = %+v", st)
	}
	if p.Head() != 100 {
		t.Errorf("Head = %d: the wrong chain's head leaked into the pool", p.Head())
	}
	results, failed := forwardN(t, p, 20)
	if failed != 0 {
		t.Fatalf("%d reads failed", failed)
	}
	for _, r := range results {
		if r != `"good"` {
			t.Fatalf("read served by %s", r)
		}
	}
	time.Sleep(5 * 50 * time.Millisecond) // a few poll intervals
	if got := wrong.countReads() + wrong.count("eth_blockNumber"); got != 0 {
		t.Errorf("wrong-chain node received %d requests besides eth_chainId, want 0", got)
	}
	if got := wrong.count("eth_chainId"); got < 2 {
		t.Errorf("wrong-chain node was asked eth_chainId %d times, want it asked again at its polls", got)
	}
	if got := s.metricValue(t, "web3gate_upstream_healthy", map[string]string{"chain": "dev", "node": "dev-0"}); got != 0 {
		t.Errorf("healthy gauge of the wrong-chain node = %v", got)
	}
}

func TestEjectionAndRecovery(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 101) // preferred while in rotation
	b := newFakeNode(t, "b", 1337, 100)
	cfg := testConfig(a, b)
	cfg.EjectAfter = 2
	cfg.Cooldown = 300 * time.Millisecond
	s := startSet(t, cfg, Deps{})
	p := s.dev(t)

	a.setReads(answer500)
	if _, failed := forwardN(t, p, 4); failed != 0 {
		t.Fatalf("%d reads failed", failed)
	}
	if got := a.countReads(); got != 2 {
		t.Errorf("failing node got %d reads, want ejectAfter = 2", got)
	}
	st := status(t, p, "dev-0")
	if st.EjectedUntil.IsZero() || st.Healthy {
		t.Fatalf("node not ejected after 2 failures: %+v", st)
	}
	if got := s.metricValue(t, "web3gate_upstream_ejections_total", map[string]string{"chain": "dev", "node": "dev-0"}); got != 1 {
		t.Errorf("ejections_total = %v, want 1", got)
	}
	probesBefore := a.count("eth_chainId")

	a.setReads(answerOK)
	wait.For(t, "the node's return", func() bool { return status(t, p, "dev-0").Healthy })
	if a.count("eth_chainId") <= probesBefore {
		t.Error("node returned to rotation without an eth_chainId probe")
	}
	if st := status(t, p, "dev-0"); !st.EjectedUntil.IsZero() || st.Failures != 0 {
		t.Errorf("returned node status = %+v", st)
	}
	if results, failed := forwardN(t, p, 1); failed != 0 || results[0] != `"a"` {
		t.Errorf("after recovery the read went to %v (failed %d), want the returned node", results, failed)
	}
}

func TestProbeFailureKeepsNodeOut(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 101)
	b := newFakeNode(t, "b", 1337, 100)
	cfg := testConfig(a, b)
	cfg.EjectAfter = 1
	cfg.Cooldown = 100 * time.Millisecond
	p := startSet(t, cfg, Deps{}).dev(t)

	a.setReads(answer500)
	a.setChecks(answer500)
	forwardN(t, p, 1)
	probes := a.count("eth_chainId")
	wait.For(t, "two failed probes", func() bool { return a.count("eth_chainId") >= probes+2 })
	if st := status(t, p, "dev-0"); st.EjectedUntil.IsZero() {
		t.Errorf("node back in rotation after failed probes: %+v", st)
	}
	if got := a.countReads(); got != 1 {
		t.Errorf("ejected node got %d reads, want 1", got)
	}
}

func TestAllEjectedStillTried(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	cfg := testConfig(a)
	cfg.EjectAfter = 1
	cfg.MaxAttempts = 1
	p := startSet(t, cfg, Deps{}).dev(t)

	a.setReads(answer500)
	if _, err := p.Forward(context.Background(), "eth_getBalance", nil); err == nil {
		t.Fatal("Forward succeeded against a failing node")
	}
	if st := status(t, p, "dev-0"); st.EjectedUntil.IsZero() {
		t.Fatalf("node not ejected: %+v", st)
	}
	a.setReads(answerOK)
	res, err := p.Forward(context.Background(), "eth_getBalance", nil)
	if err != nil || string(res) != `"a"` {
		t.Errorf("with every node ejected, Forward = %s, %v; want the best-known node tried", res, err)
	}
}

func TestNodeDownAtStartComesUp(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	a.setChecks(answer503)
	s := startSet(t, testConfig(a), Deps{})
	p := s.dev(t)

	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "dev (1337)") {
		t.Fatalf("Ready = %v, want an error naming dev (1337)", err)
	}
	if st := status(t, p, "dev-0"); st.Verified || st.Healthy {
		t.Fatalf("node down at start: %+v", st)
	}
	a.setChecks(answerOK)
	wait.For(t, "readiness", func() bool { return s.Ready() == nil })
	if p.Head() != 100 {
		t.Errorf("Head = %d, want 100", p.Head())
	}
	if results, failed := forwardN(t, p, 1); failed != 0 || results[0] != `"a"` {
		t.Errorf("read = %v (failed %d)", results, failed)
	}
}

func TestHeadTracking(t *testing.T) {
	a := newFakeNode(t, "a", 1337, 100)
	b := newFakeNode(t, "b", 1337, 100)
	p := startSet(t, testConfig(a, b), Deps{}).dev(t)

	b.head.Store(120)
	wait.For(t, "the new head", func() bool { return p.Head() == 120 })
	wait.For(t, "node a marked lagging", func() bool {
		st := status(t, p, "dev-0")
		return st.Lag == 20 && !st.Healthy
	})
	if results, failed := forwardN(t, p, 3); failed != 0 || results[0] != `"b"` {
		t.Errorf("reads = %v (failed %d), want node b", results, failed)
	}
	a.head.Store(121)
	wait.For(t, "node a back in range", func() bool { return status(t, p, "dev-0").Healthy })
}

func TestReadyNamesChainsWithoutHealthyNode(t *testing.T) {
	up := newFakeNode(t, "up", 1337, 10)
	down := newFakeNode(t, "down", 137, 10)
	down.setChecks(answer500)
	cfg := testConfig()
	cfg.Chains = []ChainConfig{
		{ChainID: 1337, Name: "dev", URLs: []string{up.URL()}},
		{ChainID: 137, Name: "polygon", URLs: []string{down.URL()}},
	}
	cfg.Mainnet = 137
	s := startSet(t, cfg, Deps{})
	err := s.Ready()
	if err == nil {
		t.Fatal("Ready = nil with polygon down")
	}
	if !strings.Contains(err.Error(), "polygon (137)") || strings.Contains(err.Error(), "dev") {
		t.Errorf("Ready = %q, want only polygon named", err)
	}
	if s.Mainnet().ChainID() != 137 {
		t.Errorf("Mainnet = %d, want 137", s.Mainnet().ChainID())
	}
	if _, ok := s.Pool(1); ok {
		t.Error("Pool(1) found an unconfigured chain")
	}
	if got := len(s.Pools()); got != 2 {
		t.Errorf("Pools = %d, want 2", got)
	}
}

// TestSecretsNeverLogged gives a node credentials in its userinfo, path and query and makes
// it produce every kind of log line; none may carry them, nor may a metric label.
func TestSecretsNeverLogged(t *testing.T) {
	const secret = "s3cr3t"
	good := newFakeNode(t, "good", 1337, 100)
	flaky := newFakeNode(t, "flaky", 1337, 101)
	wrong := newFakeNode(t, "wrong", 5, 100)
	withSecrets := func(u string) string {
		return strings.Replace(u, "http://", "http://user:"+secret+"@", 1) + "/v3/" + secret + "?apikey=" + secret
	}
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig()
	cfg.EjectAfter = 1
	cfg.Chains = []ChainConfig{{ChainID: 1337, Name: "dev", URLs: []string{
		withSecrets(good.URL()), withSecrets(flaky.URL()), withSecrets(wrong.URL()),
	}}}
	s := startSet(t, cfg, Deps{Logger: zap.New(core)})
	p := s.dev(t)
	flaky.setReads(answerHang)
	if _, failed := forwardN(t, p, 2); failed != 0 {
		t.Fatalf("%d reads failed", failed)
	}

	auth, uri := good.lastRequest()
	if got, want := auth, "Basic "+base64.StdEncoding.EncodeToString([]byte("user:"+secret)); got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	if got, want := uri, "/v3/"+secret+"?apikey="+secret; got != want {
		t.Errorf("request URI = %q, want %q", got, want)
	}
	entries := logs.All()
	for _, want := range []string{"upstream node serves another chain; out of rotation until it serves this one", "upstream node ejected", "upstream attempt failed"} {
		if logs.FilterMessage(want).Len() == 0 {
			t.Errorf("no log %q: the test proves less than it claims", want)
		}
	}
	for _, e := range entries {
		line := fmt.Sprintf("%s %v", e.Message, e.ContextMap())
		if strings.Contains(line, secret) {
			t.Errorf("log leaks a secret: %s", line)
		}
	}
	if ws := logs.FilterMessage("upstream node serves another chain; out of rotation until it serves this one").All(); len(ws) == 1 {
		fields := ws[0].ContextMap()
		if fields["node"] != "dev-2" || fields["want_chain_id"] != uint64(1337) || fields["got_chain_id"] != uint64(5) {
			t.Errorf("wrong-chain log fields = %v", fields)
		}
		if ep := fields["endpoint"]; ep != strings.TrimSuffix(wrong.URL(), "/") {
			t.Errorf("endpoint = %v, want %s", ep, wrong.URL())
		}
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), secret) || strings.Contains(l.GetValue(), "127.0.0.1") {
					t.Errorf("metric %s label %s=%q holds a URL", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestCloseLeavesNoGoroutine runs pollers and an abandoned (canceled) exchange, then closes
// everything and checks that no goroutine is left behind.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	a := newFakeNode(t, "a", 1337, 100)
	b := newFakeNode(t, "b", 1337, 100)
	cfg := testConfig(a, b)
	cfg.Timeout = 2 * time.Second
	s, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	p, _ := s.Pool(1337)
	forwardN(t, p, 3)
	a.setReads(answerHang)
	b.setReads(answerHang)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	p.Forward(ctx, "eth_getBalance", nil)
	cancel()

	a.close() // ends the hanging handlers, and so the abandoned exchange
	b.close()
	s.Close()
	s.Close()
	goleak.VerifyNone(t, before, ignoreConnsCleaner)
}

// TestNodeChangingChain: a node in rotation that moves to another chain (the same URL now
// answering another chain id) stops receiving reads within a couple of poll intervals, with
// an error log naming the node and both chain ids, its head no longer counted; once it
// answers the pool's chain id again it is back in rotation. The same holds for a node on
// another chain at start, and for a node that refuses batches (its checks then go as two
// calls).
func TestNodeChangingChain(t *testing.T) {
	for _, c := range []struct {
		name      string
		noBatch   bool
		wrongAt0  bool
		wantBatch bool // the chain id travels with the head poll in one batch
	}{
		{"in rotation, checks batched", false, false, true},
		{"in rotation, node takes no batch", true, false, false},
		{"wrong at start", false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newFakeNode(t, "a", 1337, 105) // ahead: preferred while in rotation
			b := newFakeNode(t, "b", 1337, 100)
			a.noBatch.Store(c.noBatch)
			if c.wrongAt0 {
				a.chainID.Store(5)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			cfg := testConfig(a, b)
			cfg.Batch.Enabled = true
			s := startSet(t, cfg, Deps{Logger: zap.New(core)})
			p := s.dev(t)
			servedBy := func() string {
				t.Helper()
				res, err := p.Forward(context.Background(), "eth_getBalance", []byte(`["0x0000000000000000000000000000000000000001","latest"]`))
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return string(res)
			}

			if !c.wrongAt0 {
				if got := servedBy(); got != `"a"` {
					t.Fatalf("read served by %s, want the leading node a", got)
				}
				a.chainID.Store(5)
			}
			// The poll that sees the other chain id takes the node out (pollInterval is 50ms).
			wait.For(t, "node a out of rotation", func() bool { return status(t, p, "dev-0").WrongChain })
			st := status(t, p, "dev-0")
			if st.Healthy || st.Verified || st.WrongChainID != 5 {
				t.Errorf("status = %+v", st)
			}
			readsBefore := a.countReads()
			for range 20 {
				if got := servedBy(); got != `"b"` {
					t.Fatalf("read served by %s while node a serves another chain", got)
				}
			}
			if got := a.countReads() - readsBefore; got != 0 {
				t.Errorf("node a received %d reads while out of rotation", got)
			}
			a.head.Store(900) // the other chain's head must not become the pool's
			time.Sleep(3 * 50 * time.Millisecond)
			if p.Head() != 100 {
				t.Errorf("Head = %d, want 100: the other chain's head counted", p.Head())
			}
			ws := logs.FilterMessage("upstream node serves another chain; out of rotation until it serves this one").All()
			if len(ws) != 1 || ws[0].Level != zapcore.ErrorLevel {
				t.Fatalf("wrong-chain logs = %v, want one at error level", ws)
			}
			if f := ws[0].ContextMap(); f["node"] != "dev-0" || f["want_chain_id"] != uint64(1337) || f["got_chain_id"] != uint64(5) ||
				f["was_in_rotation"] != !c.wrongAt0 {
				t.Errorf("wrong-chain log fields = %v", f)
			}

			a.chainID.Store(1337)
			a.head.Store(105)
			wait.For(t, "node a back in rotation", func() bool { return status(t, p, "dev-0").Healthy })
			if got := servedBy(); got != `"a"` {
				t.Errorf("read served by %s after node a came back, want a", got)
			}
			if n := logs.FilterMessage("upstream node serves this chain again; back in rotation").Len(); n != 1 {
				t.Errorf("%d back-in-rotation logs, want 1", n)
			}
			polls := a.count("eth_blockNumber")
			wait.For(t, "two more head polls", func() bool { return a.count("eth_blockNumber") >= polls+2 })
			if got := a.count("check batch") > 0; got != c.wantBatch {
				t.Errorf("head polls batched with eth_chainId: %v, want %v", got, c.wantBatch)
			}
			if got := logs.FilterMessage("upstream node refused the batch of its head poll; eth_chainId and eth_blockNumber go as two calls from now on").Len(); got != boolInt(c.noBatch) {
				t.Errorf("%d batch-refusal logs, want %d", got, boolInt(c.noBatch))
			}
			if st := status(t, p, "dev-0"); st.PollFailures != 0 || st.Failures != 0 {
				t.Errorf("status after = %+v: a refused batch or a wrong chain counted as failures", st)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
