package feeds

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
)

func snapshot(t *testing.T, n *anvil.Node) string {
	t.Helper()
	var id string
	if err := json.Unmarshal(call(t, n, "anvil_snapshot"), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

func revert(t *testing.T, n *anvil.Node, id string) {
	t.Helper()
	if res := call(t, n, "anvil_revert", id); string(res) != "true" {
		t.Fatalf("anvil_revert(%s) = %s", id, res)
	}
}

// TestReorgOnAnvil: three blocks with logs replaced on a real anvil node (anvil_snapshot,
// blocks, anvil_revert, other blocks) by a shorter branch, which then grows: the sink gets
// the three as Removed events oldest first, with their logs (RawRemoved: "removed": true),
// then the new branch ascending; Changes across the reorg answers the same, from the
// feed's history, and from the upstream for a replica whose feed did not see the old
// branch (anvil forgets reverted blocks: what it cannot know is left out).
func TestReorgOnAnvil(t *testing.T) { reorgOnAnvil(t, false) }

// TestReorgOnAnvilPushed is TestReorgOnAnvil with the heads pushed by anvil over its ws://
// (polling every 10s only): the same events, from pushed heads.
func TestReorgOnAnvilPushed(t *testing.T) { reorgOnAnvil(t, true) }

func reorgOnAnvil(t *testing.T, push bool) {
	n := anvilNode(t)
	s := n.session(t, 0)
	at := deployEmitter(t, s)
	base := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == base })
	var tf *testFeed
	if push {
		// The pool's head polling is 50ms: the lag check polls when a push is late; the
		// feed's own polls come every 10s.
		tf = newPushedFeed(t, n.pool, n.chainID, func(c *Config) { c.PollInterval = 10 * time.Second },
			"ws"+strings.TrimPrefix(n.anvil.URL, "http"))
	} else {
		tf = newFeed(t, n.pool, n.chainID, nil)
	}
	r := &recorder{}
	defer tf.Subscribe(r, true)()
	if push {
		wait.Within(t, waitTimeout, "the push socket", func() bool { return tf.metric(t, "web3gate_feed_push_up") == 1 })
	}
	b0 := emit(t, s, at, 1, 1)
	evs := r.waitHead(t, b0)
	cursor0 := Cursor{Number: b0, Hash: evs[len(evs)-1].Block.Hash}

	snap := snapshot(t, n.anvil)
	emit(t, s, at, 100, 2)
	emit(t, s, at, 200, 1)
	b3 := emit(t, s, at, 300, 3)
	evs = r.waitHead(t, b3)
	checkAscending(t, evs, b0, b3)
	old := evs[1:]
	cursorOld := Cursor{Number: b3, Hash: old[2].Block.Hash}

	revert(t, n.anvil, snap)
	emit(t, s, at, 1000, 1)
	b2 := emit(t, s, at, 2000, 2)
	if b2 != b0+2 {
		t.Fatalf("the new branch's second block is %d, want %d", b2, b0+2)
	}
	evs = r.waitHead(t, b2)[4:]
	if got, want := describe(evs), "-"+itoa(b0+1)+" -"+itoa(b0+2)+" -"+itoa(b0+3)+" +"+itoa(b0+1)+" +"+itoa(b0+2); got != want {
		t.Fatalf("events after the reorg: %s, want %s", got, want)
	}
	for i, ev := range evs[:3] {
		if ev.Block != old[i].Block {
			t.Fatalf("removed event %d is not the block delivered before", i)
		}
		if len(ev.Block.Logs) == 0 {
			t.Fatalf("removed block %d has no logs", ev.Block.Number)
		}
		for _, l := range ev.Block.Logs {
			if want := bytes.Replace(l.Raw, []byte(`"removed":false`), []byte(`"removed":true`), 1); !bytes.Equal(l.RawRemoved, want) || bytes.Equal(l.Raw, l.RawRemoved) {
				t.Fatalf("RawRemoved %s of Raw %s", l.RawRemoved, l.Raw)
			}
		}
	}
	added := evs[3:]
	if added[0].Block.ParentHash != cursor0.Hash {
		t.Fatalf("the new branch does not start on block %d", b0)
	}
	for _, ev := range added {
		hash, logs := canonicalBlock(t, n, ev.Block.Number)
		if ev.Block.Hash != hash || len(ev.Block.Logs) != len(logs) {
			t.Fatalf("new block %d: %s with %d logs, the node's %s with %d", ev.Block.Number, ev.Block.Hash, len(ev.Block.Logs), hash, len(logs))
		}
		for i, l := range ev.Block.Logs {
			checkLog(t, l, logs[i])
		}
	}
	if got := tf.metric(t, "web3gate_feed_reorgs_total"); got != 1 {
		t.Errorf("web3gate_feed_reorgs_total = %v, want 1", got)
	}
	if push {
		pushed, lagPolls := tf.metric(t, "web3gate_feed_pushed_heads_total"), tf.metric(t, "web3gate_feed_push_lag_polls_total")
		t.Logf("pushed heads %v, lag polls %v", pushed, lagPolls)
		if pushed < 6 {
			t.Errorf("web3gate_feed_pushed_heads_total = %v, want the 6 blocks at least", pushed)
		}
	}

	ctx := context.Background()
	t.Run("Changes from the history", func(t *testing.T) {
		removed, addedBlocks, err := tf.Changes(ctx, cursorOld, true, 100)
		if err != nil {
			t.Fatal(err)
		}
		checkEqual(t, "removed", removed, blocksOf(evs[:3]))
		checkEqual(t, "added", addedBlocks, blocksOf(added))
		removed, addedBlocks, err = tf.Changes(ctx, cursor0, true, 100)
		if err != nil {
			t.Fatal(err)
		}
		checkEqual(t, "removed", removed, nil)
		checkEqual(t, "added", addedBlocks, blocksOf(added))
		if _, _, err := tf.Changes(ctx, cursor0, true, 1); err != ErrTooFar {
			t.Errorf("Changes over 2 blocks with maxBlocks 1: %v, want ErrTooFar", err)
		}
	})

	t.Run("Changes from the upstream", func(t *testing.T) {
		other := newFeed(t, n.pool, n.chainID, nil)
		removed, addedBlocks, err := other.Changes(ctx, cursor0, true, 100)
		if err != nil {
			t.Fatal(err)
		}
		checkEqual(t, "removed", removed, nil)
		checkEqual(t, "added", addedBlocks, blocksOf(added))
		// The node is at b0+2 and forgot the old b0+3: nothing new yet.
		removed, addedBlocks, err = other.Changes(ctx, cursorOld, true, 100)
		if err != nil || len(removed) != 0 || len(addedBlocks) != 0 {
			t.Fatalf("Changes(old head) below it: %d removed, %d added, %v; want nothing", len(removed), len(addedBlocks), err)
		}
		b3new := emit(t, s, at, 3000, 1)
		removed, addedBlocks, err = other.Changes(ctx, cursorOld, true, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(removed) != 1 || removed[0].Number != b3 || removed[0].Hash != cursorOld.Hash || removed[0].Header != nil || removed[0].HasLogs ||
			removed[0].ParentHash != added[1].Block.Hash {
			t.Fatalf("removed %+v, want only the old head, unknown but for its number, hash and canonical parent", removed)
		}
		if len(addedBlocks) != 1 || addedBlocks[0].Number != b3new || !addedBlocks[0].HasLogs || len(addedBlocks[0].Logs) != 1 {
			t.Fatalf("added %d blocks, want block %d with its log", len(addedBlocks), b3new)
		}
	})
}

// TestReorgLongerBranch: two blocks replaced by four, all with logs, while the sink is
// subscribed: Removed events oldest first, then the new branch; Changes from the old head
// answers the same.
func TestReorgLongerBranch(t *testing.T) {
	n := anvilNode(t)
	s := n.session(t, 0)
	at := deployEmitter(t, s)
	base := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == base })
	tf := newFeed(t, n.pool, n.chainID, nil)
	r := &recorder{}
	defer tf.Subscribe(r, true)()
	b0 := emit(t, s, at, 1, 1)
	r.waitHead(t, b0)
	snap := snapshot(t, n.anvil)
	emit(t, s, at, 10, 1)
	b2 := emit(t, s, at, 20, 2)
	evs := r.waitHead(t, b2)
	oldHead := Cursor{Number: b2, Hash: evs[len(evs)-1].Block.Hash}
	seen := len(evs)
	revert(t, n.anvil, snap)
	// Four blocks mined at once (the four transactions land in the first), so that the feed
	// meets the longer branch in one poll.
	call(t, n.anvil, "evm_setAutomine", false)
	for i := int64(0); i < 4; i++ {
		ctx := context.Background()
		data, err := emitter.Calldata("mint721", bigInt(100+i), bigInt(1), bigInt(7))
		if err != nil {
			t.Fatal(err)
		}
		sendRaw(t, ctx, s, at, data, i == 0)
	}
	mine(t, n.anvil, 4)
	evs = r.waitHead(t, b0+4)[seen:]
	want := "-" + itoa(b0+1) + " -" + itoa(b0+2)
	for i := uint64(1); i <= 4; i++ {
		want += " +" + itoa(b0+i)
	}
	if got := describe(evs); got != want {
		t.Fatalf("events after the reorg: %s, want %s", got, want)
	}
	removed, added, err := tf.Changes(context.Background(), oldHead, true, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, "removed", removed, blocksOf(evs[:2]))
	checkEqual(t, "added", added, blocksOf(evs[2:]))
	total := 0
	for _, b := range added {
		hash, logs := canonicalBlock(t, n, b.Number)
		if b.Hash != hash || len(b.Logs) != len(logs) {
			t.Fatalf("block %d: %s with %d logs, the node's %s with %d", b.Number, b.Hash, len(b.Logs), hash, len(logs))
		}
		for i, l := range b.Logs {
			checkLog(t, l, logs[i])
		}
		total += len(b.Logs)
	}
	if total != 4 {
		t.Errorf("the new branch has %d logs, want the 4 transactions' 4", total)
	}
}

func blocksOf(evs []Event) []*Block {
	out := make([]*Block, len(evs))
	for i, ev := range evs {
		out[i] = ev.Block
	}
	return out
}

// checkEqual checks that got and want are the same blocks: numbers, hashes, headers and logs.
func checkEqual(t *testing.T, what string, got, want []*Block) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d blocks, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Number != w.Number || g.Hash != w.Hash || g.ParentHash != w.ParentHash || !bytes.Equal(g.Header, w.Header) || !g.HasLogs || len(g.Logs) != len(w.Logs) {
			t.Fatalf("%s[%d]: block %d %s (%d logs, HasLogs %v), want block %d %s (%d logs)", what, i, g.Number, g.Hash, len(g.Logs), g.HasLogs, w.Number, w.Hash, len(w.Logs))
		}
		for k := range g.Logs {
			if !bytes.Equal(g.Logs[k].Raw, w.Logs[k].Raw) || !bytes.Equal(g.Logs[k].RawRemoved, w.Logs[k].RawRemoved) {
				t.Fatalf("%s[%d]: log %d differs", what, i, k)
			}
		}
	}
}

// TestReorgDeeperThanHistory: a reorg deeper than feeds.history removes every block kept
// (oldest first, with a warning) and delivers the new branch from the oldest height kept.
func TestReorgDeeperThanHistory(t *testing.T) {
	n := anvilNode(t)
	base := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == base })
	tf := newFeed(t, n.pool, n.chainID, func(c *Config) { c.History = 4 })
	r := &recorder{}
	defer tf.Subscribe(r, false)()
	wait.Within(t, waitTimeout, "the feed's start", func() bool { return tf.tip() != nil })
	now := time.Now().Unix()
	snap := snapshot(t, n.anvil)
	for i := int64(1); i <= 6; i++ {
		call(t, n.anvil, "evm_mine", now+1000+i)
	}
	seen := len(r.waitHead(t, base+6))
	revert(t, n.anvil, snap)
	for i := int64(1); i <= 7; i++ {
		call(t, n.anvil, "evm_mine", now+5000+i)
	}
	evs := r.waitHead(t, base+7)[seen:]
	want := ""
	for i := uint64(3); i <= 6; i++ {
		want += " -" + itoa(base+i)
	}
	for i := uint64(3); i <= 7; i++ {
		want += " +" + itoa(base+i)
	}
	if got := describe(evs); got != want[1:] {
		t.Fatalf("events after the reorg: %s, want %s", got, want[1:])
	}
	for _, ev := range evs[4:] {
		if hash, _ := canonicalBlock(t, n, ev.Block.Number); ev.Block.Hash != hash {
			t.Fatalf("block %d is not the node's", ev.Block.Number)
		}
	}
	if tf.logs.FilterMessage("feed reorg deeper than feeds.history: every block kept is removed").Len() == 0 {
		t.Error("no warning about the reorg's depth")
	}
}
