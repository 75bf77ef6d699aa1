package feeds

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/wait"
)

// TestDevchainEveryBlockOnce: on the embedded dev chain (a block per transaction, now and
// then an empty one after it), a sink subscribed with logs gets every block mined after it
// subscribed exactly once, in order, each the child of the one before, as the node has it:
// the hash, geth's newHeads header (the block object without transactions, uncles, size,
// totalDifficulty, withdrawals) and the logs as eth_getLogs returns them, with "removed"
// false and true. Changes from the start answers the same blocks from the history.
func TestDevchainEveryBlockOnce(t *testing.T) {
	n := devNode(t)
	s := n.session(t, 0)
	at := deployEmitter(t, s)
	start := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
	startHash, _ := canonicalBlock(t, n, start)
	tf := newFeed(t, n.pool, n.chainID, nil)
	r := &recorder{}
	unsubscribe := tf.Subscribe(r, true)
	defer unsubscribe()

	var last uint64
	logs := 0
	for i := int64(0); i < 6; i++ {
		last = emit(t, s, at, 10*i, i%3) // 0, 1 or 2 logs
		logs += int(i % 3)
	}
	evs := r.waitAtLeast(t, last)
	checkAscending(t, evs, start+1, evs[len(evs)-1].Block.Number)
	seen := 0
	for _, ev := range evs {
		b := ev.Block
		hash, logs := canonicalBlock(t, n, b.Number)
		if b.Hash != hash {
			t.Fatalf("block %d: hash %s, the node's %s", b.Number, b.Hash, hash)
		}
		checkHeader(t, n, b)
		if !b.HasLogs || len(b.Logs) != len(logs) {
			t.Fatalf("block %d: HasLogs %v with %d logs, the node has %d", b.Number, b.HasLogs, len(b.Logs), len(logs))
		}
		for i, l := range b.Logs {
			checkLog(t, l, logs[i])
		}
		seen += len(b.Logs)
	}
	if seen != logs {
		t.Errorf("%d logs delivered, the transactions emitted %d", seen, logs)
	}
	if got := tf.metric(t, "web3gate_feed_sinks"); got != 1 {
		t.Errorf("web3gate_feed_sinks = %v, want 1", got)
	}

	_, added, err := tf.Changes(context.Background(), Cursor{Number: start, Hash: startHash}, true, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) < len(evs) {
		t.Fatalf("Changes from block %d: %d blocks, %d delivered", start, len(added), len(evs))
	}
	for i, ev := range evs {
		if added[i] != ev.Block {
			t.Fatalf("Changes from block %d: added[%d] is not the block delivered", start, i)
		}
	}

	unsubscribe()
	unsubscribe() // idempotent
	got := len(r.all())
	if m := tf.metric(t, "web3gate_feed_sinks"); m != 0 {
		t.Errorf("web3gate_feed_sinks = %v after unsubscribe, want 0", m)
	}
	other := &recorder{}
	defer tf.Subscribe(other, false)()
	next := emit(t, s, at, 99, 1)
	other.waitAtLeast(t, next)
	// The one event being delivered when unsubscribe returned may still arrive.
	if now := len(r.all()); now > got+1 {
		t.Errorf("%d events after unsubscribe", now-got)
	}
}

// checkHeader checks b.Header against the node's block object: every member but the five
// geth's newHeads leaves out, in the node's order and with its values.
func checkHeader(t *testing.T, n *node, b *Block) {
	t.Helper()
	raw, err := n.pool.Forward(context.Background(), "eth_getBlockByHash", []byte(`["`+b.Hash.Hex()+`",false]`))
	if err != nil {
		t.Fatal(err)
	}
	var full, hdr orderedObject
	if err := json.Unmarshal(raw, &full); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Header, &hdr); err != nil {
		t.Fatalf("block %d: header %s: %v", b.Number, b.Header, err)
	}
	var want orderedObject
	for _, m := range full {
		switch m.key {
		case "transactions", "uncles", "size", "totalDifficulty", "withdrawals":
		default:
			want = append(want, m)
		}
	}
	if len(want) == len(full) {
		t.Fatalf("block %d: the node's block has none of the members newHeads drops: %s", b.Number, raw)
	}
	if len(hdr) != len(want) {
		t.Fatalf("block %d: header has %d members, want %d: %s", b.Number, len(hdr), len(want), b.Header)
	}
	for i := range want {
		if hdr[i].key != want[i].key || !bytes.Equal(hdr[i].value, want[i].value) {
			t.Fatalf("block %d: header member %d is %s: %s, want %s: %s", b.Number, i, hdr[i].key, hdr[i].value, want[i].key, want[i].value)
		}
	}
}

// checkLog checks a feed log against the node's log object.
func checkLog(t *testing.T, l Log, node json.RawMessage) {
	t.Helper()
	if !bytes.Equal(l.Raw, node) {
		t.Fatalf("Raw = %s, the node's %s", l.Raw, node)
	}
	if !bytes.Contains(node, []byte(`"removed":false`)) {
		t.Fatalf("the node's log has no removed:false: %s", node)
	}
	if want := bytes.Replace(node, []byte(`"removed":false`), []byte(`"removed":true`), 1); !bytes.Equal(l.RawRemoved, want) {
		t.Fatalf("RawRemoved = %s, want %s", l.RawRemoved, want)
	}
	var obj struct {
		Address common.Address `json:"address"`
		Topics  []common.Hash  `json:"topics"`
	}
	if err := json.Unmarshal(node, &obj); err != nil {
		t.Fatal(err)
	}
	if l.Address != obj.Address || len(l.Topics) != len(obj.Topics) {
		t.Fatalf("log %s: address %s, %d topics", node, l.Address, len(l.Topics))
	}
	for i := range obj.Topics {
		if l.Topics[i] != obj.Topics[i] {
			t.Fatalf("log %s: topic %d is %s", node, i, l.Topics[i])
		}
	}
}

// orderedObject is a JSON object's members in order.
type orderedObject []member

type member struct {
	key   string
	value json.RawMessage
}

func (o *orderedObject) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, member{key: k.(string), value: v})
	}
	return nil
}

// TestCatchUpAfterOutage: while every upstream call fails, blocks are mined (more than a run
// of one batch, some with logs); when the pool answers again, every block is delivered once,
// in order, with its logs.
func TestCatchUpAfterOutage(t *testing.T) {
	n := anvilNode(t)
	s := n.session(t, 0)
	at := deployEmitter(t, s)
	start := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
	c := newCounting(n.pool)
	tf := newFeed(t, c, n.chainID, nil)
	r := &recorder{}
	defer tf.Subscribe(r, true)()
	mine(t, n.anvil, 1)
	r.waitHead(t, start+1)

	c.down.Store(true)
	mine(t, n.anvil, 70)
	withLogs := []uint64{emit(t, s, at, 1, 2), emit(t, s, at, 5, 1)}
	mine(t, n.anvil, 60)
	last := emit(t, s, at, 9, 3)
	withLogs = append(withLogs, last)
	wait.Within(t, waitTimeout, "a failed round", func() bool { return tf.logs.FilterMessage("feed round failed; retrying").Len() > 0 })
	c.down.Store(false)

	evs := r.waitHead(t, last)
	checkAscending(t, evs, start+1, last)
	for _, ev := range evs {
		hash, logs := canonicalBlock(t, n, ev.Block.Number)
		if ev.Block.Hash != hash || !ev.Block.HasLogs || len(ev.Block.Logs) != len(logs) {
			t.Fatalf("block %d: hash %s with %d logs (HasLogs %v), the node's %s with %d", ev.Block.Number, ev.Block.Hash, len(ev.Block.Logs), ev.Block.HasLogs, hash, len(logs))
		}
		for i, l := range ev.Block.Logs {
			checkLog(t, l, logs[i])
		}
	}
	for _, b := range withLogs {
		if got := len(evs[b-start-1].Block.Logs); got == 0 {
			t.Errorf("block %d has no logs", b)
		}
	}
	if got := tf.metric(t, "web3gate_feed_lag_blocks"); got != 0 {
		t.Errorf("web3gate_feed_lag_blocks = %v after the catch-up", got)
	}
	if tf.logs.FilterMessage("feed resumed").Len() != 1 {
		t.Errorf("no \"feed resumed\" log line")
	}
}

// TestGapLongerThanMaxCatchUp: a gap longer than feeds.maxCatchUp is not replayed: a
// warning, and the feed resumes at the head.
func TestGapLongerThanMaxCatchUp(t *testing.T) {
	n := anvilNode(t)
	start := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
	c := newCounting(n.pool)
	tf := newFeed(t, c, n.chainID, func(c *Config) { c.MaxCatchUp = 10 })
	r := &recorder{}
	defer tf.Subscribe(r, false)()
	mine(t, n.anvil, 2)
	r.waitHead(t, start+2)
	c.down.Store(true)
	mine(t, n.anvil, 11)
	c.down.Store(false)
	evs := r.waitHead(t, start+13)
	if got := describe(evs); len(evs) != 3 || evs[0].Block.Number != start+1 || evs[1].Block.Number != start+2 {
		t.Fatalf("events %s, want blocks %d, %d and %d", got, start+1, start+2, start+13)
	}
	if tf.logs.FilterMessage("feed gap longer than feeds.maxCatchUp: resuming at the head, the blocks in between are not delivered").Len() != 1 {
		t.Errorf("no warning about the gap")
	}
	mine(t, n.anvil, 1)
	evs = r.waitHead(t, start+14)
	if evs[2].Block.Hash != evs[3].Block.ParentHash {
		t.Errorf("the block after the jump is not the child of the head jumped to")
	}
}

// TestUnsubscribeStopsTheFeed: without sinks and filter polls a feed stops after idleAfter
// and forgets its history and the sinks it delivered to; the next sink starts it again.
func TestUnsubscribeStopsTheFeed(t *testing.T) {
	n := anvilNode(t)
	c := newCounting(n.pool)
	tf := newFeed(t, c, n.chainID, nil)
	tf.idleAfter = 50 * time.Millisecond
	r := &recorder{}
	unsubscribe := tf.Subscribe(r, false)
	wait.Within(t, waitTimeout, "a head poll", func() bool { return c.snapshot()["latest"] > 0 })
	unsubscribe()
	wait.Within(t, waitTimeout, "the feed to stop", func() bool {
		tf.mu.Lock()
		defer tf.mu.Unlock()
		return !tf.running && len(tf.hist) == 0
	})
	tf.mu.Lock()
	kept := len(tf.snapshot)
	tf.mu.Unlock()
	if kept != 0 {
		t.Fatalf("the stopped feed keeps %d sinks", kept)
	}
	polls := c.snapshot()["latest"]
	time.Sleep(100 * time.Millisecond)
	if got := c.snapshot()["latest"]; got != polls {
		t.Fatalf("%d head polls after the feed stopped", got-polls)
	}
	start := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
	defer tf.Subscribe(r, false)()
	mine(t, n.anvil, 1)
	r.waitHead(t, start+1)
}

// TestPoolHeadWakesTheFeed: with a poll interval of an hour, new blocks are delivered as
// soon as the pool's own head polling sees them.
func TestPoolHeadWakesTheFeed(t *testing.T) {
	n := anvilNode(t)
	start := n.head(t)
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
	tf := newFeed(t, n.pool, n.chainID, func(c *Config) { c.PollInterval = time.Hour })
	r := &recorder{}
	defer tf.Subscribe(r, false)()
	wait.Within(t, waitTimeout, "the feed's start", func() bool { return tf.tip() != nil })
	mine(t, n.anvil, 1)
	r.waitHead(t, start+1)
	mine(t, n.anvil, 2)
	checkAscending(t, r.waitHead(t, start+3), start+1, start+3)
}
