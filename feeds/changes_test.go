package feeds

import (
	"context"
	"errors"
	"testing"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// TestChanges: the filter polls of HTTP filters (on anvil, where the tests' transactions are
// the only blocks), polled
// like eth_getFilterChanges with the cursor kept by the caller: Latest, then Changes from
// it, from the upstream at first (the feed has no history), then from the history (no
// upstream call but the feed's own), with logs also for blocks delivered without them;
// ErrTooFar beyond maxBlocks.
func TestChanges(t *testing.T) {
	n := anvilNode(t)
	s := n.session(t, 0)
	at := deployEmitter(t, s)
	c := newCounting(n.pool)
	tf := newFeed(t, c, n.chainID, nil)
	ctx := context.Background()

	cur, err := tf.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hash, _ := canonicalBlock(t, n, cur.Number); cur.Number != n.head(t) || cur.Hash != hash {
		t.Fatalf("Latest = %d %s, the node's head %d %s", cur.Number, cur.Hash, n.head(t), hash)
	}
	first := emit(t, s, at, 1, 2)
	emit(t, s, at, 3, 0)
	last := emit(t, s, at, 4, 1)

	poll := func(logs bool, maxBlocks int) []*Block {
		t.Helper()
		removed, added, err := tf.Changes(ctx, cur, logs, maxBlocks)
		if err != nil {
			t.Fatal(err)
		}
		if len(removed) != 0 {
			t.Fatalf("%d removed blocks without a reorg", len(removed))
		}
		for i, b := range added {
			hash, logs := canonicalBlock(t, n, b.Number)
			if b.Number != cur.Number+1+uint64(i) || b.Hash != hash || (i == 0 && b.ParentHash != cur.Hash) {
				t.Fatalf("added[%d] is block %d %s, want block %d %s", i, b.Number, b.Hash, cur.Number+1+uint64(i), hash)
			}
			if !b.HasLogs || len(b.Logs) != len(logs) {
				t.Fatalf("block %d: HasLogs %v, %d logs, the node's %d", b.Number, b.HasLogs, len(b.Logs), len(logs))
			}
			for k, l := range b.Logs {
				checkLog(t, l, logs[k])
			}
		}
		if len(added) > 0 {
			cur = Cursor{Number: added[len(added)-1].Number, Hash: added[len(added)-1].Hash}
		}
		return added
	}
	// The feed started with Latest; its history may be a poll behind the chain: the first
	// poll answers some of the blocks, or none.
	if added := poll(true, 100); len(added) > 0 && added[0].Number != first {
		t.Fatalf("the first poll added blocks %s, want %d …", describe(eventsOf(added)), first)
	}
	wait.Within(t, waitTimeout, "the feed to deliver the last block", func() bool { b := tf.tip(); return b != nil && b.Number == last })
	poll(true, 100)
	if cur.Number != last {
		t.Fatalf("cursor at %d after the polls, want %d", cur.Number, last)
	}

	// From the history now: no upstream call but the feed's own (head polls and logs).
	next := emit(t, s, at, 10, 3)
	wait.Within(t, waitTimeout, "the feed to deliver the next block", func() bool { b := tf.tip(); return b != nil && b.Number == next })
	before := c.snapshot()
	if added := poll(true, 100); len(added) != 1 || added[0].Number != next || len(added[0].Logs) != 3 {
		t.Fatalf("the poll added %d blocks, want block %d with its 3 logs", len(added), next)
	}
	after := c.snapshot()
	for _, m := range []string{methodBlockByHash, methodBlockByNumber, methodGetLogs} {
		if after[m] != before[m] {
			t.Errorf("a poll answered from the history called %s %d times", m, after[m]-before[m])
		}
	}
	if added := poll(true, 100); len(added) != 0 {
		t.Fatalf("a poll without new blocks added %d", len(added))
	}

	// Too far: three blocks with maxBlocks 2; the cursor does not move.
	at0 := cur
	var third uint64
	for i := int64(0); i < 3; i++ {
		third = emit(t, s, at, 20+i, 1)
	}
	wait.Within(t, waitTimeout, "the feed to deliver the third block", func() bool { b := tf.tip(); return b != nil && b.Number == third })
	_, _, err = tf.Changes(ctx, at0, false, 2)
	if !errors.Is(err, ErrTooFar) {
		t.Fatalf("Changes over 3 blocks with maxBlocks 2: %v, want ErrTooFar", err)
	}
	if added := poll(false, 3); len(added) != 3 {
		t.Fatalf("Changes over 3 blocks with maxBlocks 3 added %d", len(added))
	}

	tf.set.Close()
	if _, err := tf.Latest(ctx); !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Errorf("Latest after Close: %v", err)
	}
	if _, _, err := tf.Changes(ctx, cur, false, 0); !errors.Is(err, jsonrpc.ErrUpstreamUnavailable) {
		t.Errorf("Changes after Close: %v", err)
	}
	tf.Subscribe(&recorder{}, true)() // nothing, no goroutine
}

// TestChangesFillsLogs: blocks delivered while nobody wanted logs get them read by hash for
// a Changes with logs; the feed then fetches logs with every block, and keeps the filled
// blocks in its history.
func TestChangesFillsLogs(t *testing.T) {
	n := anvilNode(t)
	s := n.session(t, 0)
	at := deployEmitter(t, s)
	start := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
	tf := newFeed(t, n.pool, n.chainID, nil)
	r := &recorder{}
	defer tf.Subscribe(r, false)()
	b1 := emit(t, s, at, 1, 2)
	evs := r.waitHead(t, b1)
	if evs[0].Block.HasLogs {
		t.Fatal("logs fetched without a consumer of logs")
	}
	_, added, err := tf.Changes(context.Background(), Cursor{Number: start, Hash: evs[0].Block.ParentHash}, true, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 || !added[0].HasLogs || len(added[0].Logs) != 2 || added[0].Hash != evs[0].Block.Hash {
		t.Fatalf("Changes with logs: %d blocks, want block %d with its 2 logs", len(added), b1)
	}
	if tf.canonical(b1) != added[0] {
		t.Error("the history does not keep the block with its logs")
	}
	b2 := emit(t, s, at, 5, 1)
	evs = r.waitHead(t, b2)
	if last := evs[len(evs)-1].Block; !last.HasLogs || len(last.Logs) != 1 {
		t.Fatalf("block %d after a Changes with logs: HasLogs %v, %d logs", b2, last.HasLogs, len(last.Logs))
	}
}

func eventsOf(blocks []*Block) []Event {
	out := make([]Event, len(blocks))
	for i, b := range blocks {
		out[i] = Event{Block: b}
	}
	return out
}
