package upstreams

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// batchingSet starts a set of one fake node with upstream batching at maxInFlight 1, and
// returns its pool and the node's coalescer.
func batchingSet(t *testing.T, f *fakeNode, mutate func(*Config)) (testSet, *Pool, *coalescer) {
	t.Helper()
	cfg := testConfig(f)
	cfg.Batch = BatchConfig{Enabled: true, MaxInFlight: 1, MaxSize: 50}
	if mutate != nil {
		mutate(&cfg)
	}
	s := startSet(t, cfg, Deps{})
	p := s.dev(t)
	wait.For(t, "the node verified", p.healthy)
	co := p.nodes[0].co
	if co == nil {
		t.Fatal("the http node has no coalescer")
	}
	return s, p, co
}

func (c *coalescer) state() (inFlight, queued int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight, len(c.queue)
}

// holdSlot starts one echo_params call that occupies the node's only slot until release is
// called (at the latest when the test ends), and returns a channel that yields its error.
// The slot is held by the node, not for a time: calls queue behind it however slow the
// machine is.
func holdSlot(t *testing.T, f *fakeNode, p *Pool, co *coalescer) (done <-chan error, release func()) {
	t.Helper()
	gate := make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	f.hold.Store(&gate)
	errc := make(chan error, 1)
	go func() {
		res, err := p.Forward(context.Background(), "echo_params", []byte(`["holder"]`))
		if err == nil && string(res) != `["holder"]` {
			err = fmt.Errorf("holder got %s", res)
		}
		errc <- err
	}()
	wait.For(t, "the slot taken", func() bool { n, _ := co.state(); return n == 1 })
	return errc, release
}

// queueBehindHolder holds the node's only slot with one call (holdSlot), queues n
// echo_params calls behind it, each with its own params, releases the holder once all of
// them queued and waits for all of them: the holder must succeed, and every queued caller
// must get its own answer.
func queueBehindHolder(t *testing.T, f *fakeNode, p *Pool, co *coalescer, n int) {
	t.Helper()
	holder, release := holdSlot(t, f, p, co)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf(`["call-%d"]`, i)
			res, err := p.Forward(context.Background(), "echo_params", []byte(want))
			switch {
			case err != nil:
				errs[i] = err
			case string(res) != want:
				errs[i] = fmt.Errorf("call %d got %s, want %s", i, res, want)
			}
		})
	}
	wait.For(t, "the calls queued", func() bool { _, q := co.state(); return q == n })
	release()
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestBatchingSendsQueuedCallsAsOneBatch(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	s, p, co := batchingSet(t, f, nil)

	queueBehindHolder(t, f, p, co, 10)
	if got := f.count("batch"); got != 1 {
		t.Errorf("batches = %d, want 1: the 10 queued calls leave together", got)
	}
	if got := f.count("batched echo_params"); got != 10 {
		t.Errorf("calls in batches = %d, want 10", got)
	}
	if got := f.count("echo_params"); got != 1 {
		t.Errorf("calls sent alone = %d, want 1 (the holder)", got)
	}
	if n, q := co.state(); n != 0 || q != 0 {
		t.Errorf("after the load: %d in flight, %d queued; want 0, 0", n, q)
	}
	labels := map[string]string{"chain": "dev", "node": "dev-0"}
	if got := s.metricValue(t, "web3gate_upstream_batches_total", labels); got != 1 {
		t.Errorf("web3gate_upstream_batches_total = %v, want 1", got)
	}
	if got := s.metricValue(t, "web3gate_upstream_batched_calls_total", labels); got != 10 {
		t.Errorf("web3gate_upstream_batched_calls_total = %v, want 10", got)
	}
	if probs := f.problems(); len(probs) > 0 {
		t.Errorf("the node saw malformed requests: %v", probs)
	}
}

func TestBatchingIdleNodeSendsAlone(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	_, p, _ := batchingSet(t, f, func(c *Config) { c.Batch.MaxInFlight = 4 })
	for i := range 20 {
		want := fmt.Sprintf(`[%d]`, i)
		res, err := p.Forward(context.Background(), "echo_params", []byte(want))
		if err != nil || string(res) != want {
			t.Fatalf("call %d: %s, %v", i, res, err)
		}
	}
	if got := f.count("batch"); got != 0 {
		t.Errorf("batches = %d: calls one at a time must never wait for a batch", got)
	}
}

func TestBatchingMaxSize(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	_, p, co := batchingSet(t, f, func(c *Config) { c.Batch.MaxSize = 4 })
	queueBehindHolder(t, f, p, co, 10)
	// 10 queued calls at most 4 a batch: 4, 4, 2 (calls that queue meanwhile would join).
	if got := f.count("batch"); got != 3 {
		t.Errorf("batches = %d, want 3", got)
	}
}

func TestBatchingMissingAnswerFailsOver(t *testing.T) {
	// The node drops one response of each batch: that call fails over alone; the others
	// keep their answers.
	f := newFakeNode(t, "a", 1337, 100)
	_, p, co := batchingSet(t, f, nil)
	f.dropOne.Store(true) // the holder goes alone: the first batch is the queued calls'
	queueBehindHolder(t, f, p, co, 5)
	// One batch of 5, then the call it lacked alone (or in a batch of one: alone).
	if got := f.count("batched echo_params"); got != 5 {
		t.Errorf("calls in batches = %d, want 5", got)
	}
	if got := f.count("echo_params"); got != 2 {
		t.Errorf("calls sent alone = %d, want 2 (the holder and the retried one)", got)
	}
}

func TestBatchingNodeWithoutBatchSupport(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	f.noBatch.Store(true)
	_, p, co := batchingSet(t, f, nil)
	queueBehindHolder(t, f, p, co, 5) // every call succeeds: the node answers calls alone
	if !co.off.Load() {
		t.Fatal("batching is still on for a node that refused a batch")
	}
	if got := f.count("batch"); got != 1 {
		t.Errorf("batches = %d, want 1: after the refusal calls go alone", got)
	}
	if got := f.count("echo_params"); got != 6 {
		t.Errorf("calls sent alone = %d, want 6 (the holder and the 5 retried)", got)
	}
}

func TestBatchingNeverHoldsSendRawTransaction(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	_, p, co := batchingSet(t, f, nil)
	holder, release := holdSlot(t, f, p, co)
	// The slot is taken, yet the raw transaction goes at once, alone.
	if _, err := p.Forward(context.Background(), "eth_sendRawTransaction", []byte(`["0x01"]`)); err != nil {
		t.Fatal(err)
	}
	if _, q := co.state(); q != 0 {
		t.Errorf("%d calls queued", q)
	}
	release()
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	if got, batched := f.count("eth_sendRawTransaction"), f.count("batched eth_sendRawTransaction"); got != 1 || batched != 0 {
		t.Errorf("eth_sendRawTransaction sent alone %d times, in batches %d times; want 1, 0", got, batched)
	}
}

func TestBatchingQueuedCallLeavesOnCancel(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	_, p, co := batchingSet(t, f, nil)
	holder, release := holdSlot(t, f, p, co)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Forward(ctx, "echo_params", []byte(`["gone"]`))
		done <- err
	}()
	wait.For(t, "the call queued", func() bool { _, q := co.state(); return q == 1 })
	cancel()
	// The holder keeps the slot until released below: the canceled call ends without it.
	select {
	case err := <-done:
		if !errors.Is(err, errCanceled) {
			t.Fatalf("canceled queued call: %v", err)
		}
	case <-time.After(wait.Limit):
		t.Fatalf("the canceled call still waits for the slot after %s", wait.Limit)
	}
	release()
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	// The abandoned call is not sent: nobody waits for its answer.
	wait.For(t, "the slot free", func() bool { n, _ := co.state(); return n == 0 })
	if got := f.count("batch") + f.count("echo_params"); got != 1 {
		t.Errorf("exchanges = %d, want 1 (the holder only)", got)
	}
}

func TestBatchingQueuedCallTimesOut(t *testing.T) {
	// The slot holder hangs; a queued call ends at its own attempt deadline, not later.
	f := newFakeNode(t, "a", 1337, 100)
	_, p, co := batchingSet(t, f, func(c *Config) { c.MaxAttempts = 1 })
	f.setReads(answerHang)
	holder, _ := holdSlot(t, f, p, co) // never released: it hangs past its own timeout
	start := time.Now()
	_, err := p.Forward(context.Background(), "echo_params", []byte(`["late"]`))
	if !errors.Is(err, jsonrpc.ErrUpstreamTimeout) {
		t.Fatalf("queued call behind a hanging one: %v, want the upstream timeout", err)
	}
	if waited := time.Since(start); waited > 2*300*time.Millisecond {
		t.Errorf("waited %v, beyond the attempt timeout of 300ms", waited)
	}
	<-holder
}

// TestBatchingLeaderGathersRunnableCalls: a call that takes a free slot yields once, and the
// calls other goroutines queue meanwhile leave with it in one batch, each with its answer.
func TestBatchingLeaderGathersRunnableCalls(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	s, p, co := batchingSet(t, f, func(c *Config) { c.Batch.MaxInFlight = 4 })
	const n = 5
	yielding, resume := make(chan struct{}), make(chan struct{})
	co.yield = func() { close(yielding); <-resume } // stands for the goroutines runnable now

	forward := func(params string) error {
		res, err := p.Forward(context.Background(), "echo_params", []byte(params))
		if err == nil && string(res) != params {
			err = fmt.Errorf("%s got %s", params, res)
		}
		return err
	}
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	wg.Go(func() { errs[n] = forward(`["leader"]`) })
	<-yielding
	for i := range n {
		wg.Go(func() { errs[i] = forward(fmt.Sprintf(`["call-%d"]`, i)) })
	}
	wait.For(t, "the calls queued behind the leader", func() bool { in, q := co.state(); return in == 1 && q == n })
	close(resume)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := f.count("batch"); got != 1 {
		t.Errorf("batches = %d, want 1", got)
	}
	if got, alone := f.count("batched echo_params"), f.count("echo_params"); got != n+1 || alone != 0 {
		t.Errorf("calls in batches = %d, alone = %d; want %d, 0", got, alone, n+1)
	}
	labels := map[string]string{"chain": "dev", "node": "dev-0"}
	if got := s.metricValue(t, "web3gate_upstream_batched_calls_total", labels); got != n+1 {
		t.Errorf("web3gate_upstream_batched_calls_total = %v, want %d", got, n+1)
	}
	if in, q := co.state(); in != 0 || q != 0 {
		t.Errorf("after the calls: %d in flight, %d queued; want 0, 0", in, q)
	}
}

// A call whose context can be canceled does not lead a batch: it goes alone, at once.
func TestBatchingCancelableCallDoesNotLead(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	_, p, co := batchingSet(t, f, func(c *Config) { c.Batch.MaxInFlight = 4 })
	var yields atomic.Int32
	co.yield = func() { yields.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := p.Forward(ctx, "echo_params", []byte(`["x"]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Forward(context.Background(), "echo_params", []byte(`["y"]`)); err != nil {
		t.Fatal(err)
	}
	if got := yields.Load(); got != 1 {
		t.Errorf("yields = %d, want 1 (only the call that cannot be canceled)", got)
	}
	if got := f.count("echo_params"); got != 2 {
		t.Errorf("calls sent alone = %d, want 2", got)
	}
}

// A queued call that nothing can cancel has no timer: a batch drops it once its deadline has
// passed (it times out, unsent), and takes the earliest deadline of the others.
func TestBatchingDropsExpiredOwnedCall(t *testing.T) {
	f := newFakeNode(t, "a", 1337, 100)
	_, _, co := batchingSet(t, f, nil)
	before := f.count("echo_params") + f.count("batch")
	expired := ownedCall(1, []byte(`{"jsonrpc":"2.0","id":1,"method":"echo_params","params":["late"]}`), nil, time.Now().Add(-time.Millisecond))
	live := ownedCall(2, []byte(`{"jsonrpc":"2.0","id":2,"method":"echo_params","params":["live"]}`), nil, time.Now().Add(2*time.Second))
	co.exchange([]*joined{expired, live}, nil)
	<-expired.done
	<-live.done
	if _, _, err := expired.result(); !errors.Is(err, errAttemptTimeout) {
		t.Errorf("expired call: %v, want the attempt timeout", err)
	}
	status, out, err := live.result()
	if err != nil || status != 200 || !strings.Contains(string(out), `["live"]`) {
		t.Errorf("live call: %d %s %v", status, out, err)
	}
	if got := f.count("echo_params") + f.count("batch") - before; got != 1 {
		t.Errorf("exchanges = %d, want 1 (the live call alone)", got)
	}
}
