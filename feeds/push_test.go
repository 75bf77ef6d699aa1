package feeds

import (
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/upstreams"
)

// TestPushLaggingNode: two anvil nodes of one genesis, mined only on the second; the feed's
// first socket is the first node's, which pushes nothing. The pool's head (the second node)
// stays above the delivered block, so the feed polls and moves its socket to the second
// node, whose pushes it then takes: every block once, in order, across the move, and with
// the push from the second node no upstream call per block (newHeads only).
func TestPushLaggingNode(t *testing.T) {
	args := []string{"--no-mining", "--timestamp", "1700000000"}
	a, b := anvil.Start(t, 31337, args...), anvil.Start(t, 31337, args...)
	cfg := upstreamConfig(31337, a.URL, b.URL)
	cfg.MaxLag = new(uint64(0)) // reads only from the node at the best head
	pool := startPool(t, cfg, upstreams.Deps{})
	chain := newCounting(pool)
	ws := func(n *anvil.Node) string { return "ws" + strings.TrimPrefix(n.URL, "http") }
	tf := newPushedFeed(t, chain, 31337, func(c *Config) { c.PollInterval = 200 * time.Millisecond }, ws(a), ws(b))
	r := &recorder{}
	defer tf.Subscribe(r, false)()
	wait.Within(t, waitTimeout, "the push socket", func() bool { return tf.metric(t, "web3gate_feed_push_up") == 1 })

	ts := int64(1_700_000_000)
	mineB := func() {
		t.Helper()
		ts += 12
		call(t, b, "evm_mine", map[string]any{"timestamp": ts, "blocks": 1})
	}
	// The first node lags: the feed finds out from the pool and moves to the second.
	mineB()
	r.waitHead(t, 1)
	wait.Within(t, waitTimeout, "the socket moved to the second node", func() bool {
		return tf.metric(t, "web3gate_feed_push_lag_polls_total") >= 1 && tf.metric(t, "web3gate_feed_push_up") == 1
	})
	// Give the new socket its subscription before counting.
	time.Sleep(100 * time.Millisecond)
	pushed0, before := tf.metric(t, "web3gate_feed_pushed_heads_total"), tf.metric(t, "web3gate_feed_upstream_calls_total")
	const n = 10
	for i := uint64(2); i <= 1+n; i++ {
		mineB()
		r.waitHead(t, i)
	}
	calls := tf.metric(t, "web3gate_feed_upstream_calls_total") - before
	pushed := tf.metric(t, "web3gate_feed_pushed_heads_total") - pushed0
	t.Logf("after the move: %v heads pushed, %v feed upstream calls for %d blocks; lag polls %v; calls by method %v",
		pushed, calls, n, tf.metric(t, "web3gate_feed_push_lag_polls_total"), chain.snapshot())
	if pushed < n {
		t.Errorf("%v heads pushed for %d blocks after the move, want every one", pushed, n)
	}
	if calls > n {
		t.Errorf("%v feed upstream calls for %d pushed blocks, want at most one per block", calls, n)
	}
	checkAscending(t, r.all(), 1, 1+n)
}

// TestPushedFeedStopsWhenIdle: a feed taking pushed heads stops after idleAfter without
// sinks, though no head comes, and closes its socket; the next sink opens it again.
func TestPushedFeedStopsWhenIdle(t *testing.T) {
	n := anvilNode(t)
	tf := newPushedFeed(t, n.pool, n.chainID, nil, "ws"+strings.TrimPrefix(n.anvil.URL, "http"))
	tf.idleAfter = 50 * time.Millisecond
	r := &recorder{}
	unsubscribe := tf.Subscribe(r, false)
	wait.Within(t, waitTimeout, "the push socket", func() bool { return tf.metric(t, "web3gate_feed_push_up") == 1 })
	unsubscribe()
	wait.Within(t, waitTimeout, "the feed to stop and close its socket", func() bool {
		tf.mu.Lock()
		stopped := !tf.running
		tf.mu.Unlock()
		return stopped && tf.metric(t, "web3gate_feed_push_up") == 0
	})
	start := n.head(t)
	defer tf.Subscribe(r, false)()
	wait.Within(t, waitTimeout, "the push socket again", func() bool { return tf.metric(t, "web3gate_feed_push_up") == 1 })
	mine(t, n.anvil, 1)
	r.waitHead(t, start+1)
}
