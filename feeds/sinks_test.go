package feeds

import (
	"fmt"
	"testing"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/upstreams"
)

// TestThousandSinksConstantCalls: the upstream calls per block are the same for 1 sink and
// for 1,000 sinks (all with logs): besides the head polls, one eth_getLogs per block, no
// other call, while every sink gets every block with its logs.
func TestThousandSinksConstantCalls(t *testing.T) {
	for _, sinks := range []int{1, 1000} {
		t.Run(fmt.Sprintf("%d sinks", sinks), func(t *testing.T) {
			n := anvilNode(t)
			s := n.session(t, 0)
			at := deployEmitter(t, s)
			start := n.head(t)
			wait.Within(t, waitTimeout, "the pool's head", func() bool { return n.pool.Head() == start })
			c := newCounting(n.pool)
			tf := newFeed(t, c, n.chainID, nil)
			rs := make([]*recorder, sinks)
			for i := range rs {
				rs[i] = &recorder{}
				defer tf.Subscribe(rs[i], true)()
			}
			wait.Within(t, waitTimeout, "the feed's start", func() bool { return tf.tip() != nil })
			before := c.snapshot()
			const blocks = 5
			var last uint64
			for i := int64(0); i < blocks; i++ {
				last = emit(t, s, at, 10*i, 2)
				// One block at a time: each round brings one block.
				rs[0].waitHead(t, last)
			}
			after := c.snapshot()
			for _, m := range []string{methodGetLogs, methodBlockByNumber, methodBlockByHash} {
				want := 0
				if m == methodGetLogs {
					want = blocks
				}
				if got := after[m] - before[m]; got != want {
					t.Errorf("%s calls for %d blocks: %d, want %d", m, blocks, got, want)
				}
			}
			for i, r := range rs {
				evs := r.waitHead(t, last)
				checkAscending(t, evs, start+1, last)
				for _, ev := range evs {
					if len(ev.Block.Logs) != 2 || ev.Block != rs[0].all()[ev.Block.Number-start-1].Block {
						t.Fatalf("sink %d: block %d with %d logs, not the block the others got", i, ev.Block.Number, len(ev.Block.Logs))
					}
				}
			}
			if got := tf.metric(t, "web3gate_feed_sinks"); got != float64(sinks) {
				t.Errorf("web3gate_feed_sinks = %v, want %d", got, sinks)
			}
			if got := tf.metric(t, "web3gate_feed_upstream_calls_total"); got < float64(blocks) {
				t.Errorf("web3gate_feed_upstream_calls_total = %v, want at least %d", got, blocks)
			}
		})
	}
}

// nopSink counts what it gets.
type nopSink struct{ n int }

func (s *nopSink) Deliver(Event) { s.n++ }

// TestDeliverDoesNotAllocatePerSink: delivering an event to 1,000 sinks allocates what
// delivering it to one does.
func TestDeliverDoesNotAllocatePerSink(t *testing.T) {
	allocs := func(sinks int) float64 {
		set, err := New(Config{History: 2}, Deps{Chains: map[uint64]Chain{1: unusedChain{}}})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		f, _ := set.Feed(1)
		ss := make([]*nopSink, sinks)
		for i := range ss {
			ss[i] = &nopSink{}
			f.snapshot = append(f.snapshot, &sinkEntry{s: ss[i]})
		}
		f.hist = []*Block{{Number: 0}}
		num := uint64(0)
		blocks := make([]*Block, 200)
		for i := range blocks {
			blocks[i] = &Block{Number: uint64(i + 1)}
			blocks[i].Hash[0], blocks[i].Hash[1] = byte(i), byte(i>>8)
		}
		run := make([]*Block, 1)
		a := testing.AllocsPerRun(100, func() {
			run[0] = blocks[num]
			num++
			f.deliver(nil, run)
		})
		if ss[sinks-1].n == 0 {
			t.Fatal("the sinks got nothing")
		}
		return a
	}
	if one, many := allocs(1), allocs(1000); many > one {
		t.Errorf("deliver allocates %v times with 1,000 sinks, %v with one", many, one)
	}
}

// unusedChain is a Chain for tests that never reach the upstream.
type unusedChain struct{ Chain }

// TestFailoverToLaggingNode: two anvil nodes with the same blocks (same genesis time, blocks
// mined with the same timestamps), one ahead. The feed follows it; when it dies the pool
// answers from the lagging node: nothing is delivered backwards, and once that node has
// passed the delivered head the blocks after it follow, each once.
func TestFailoverToLaggingNode(t *testing.T) {
	const genesis = 1_700_000_000
	a := anvil.Start(t, 31337, "--timestamp", fmt.Sprint(genesis))
	b := anvil.Start(t, 31337, "--timestamp", fmt.Sprint(genesis))
	mineAt := func(nodes []*anvil.Node, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			for _, n := range nodes {
				call(t, n, "evm_mine", genesis+12*i)
			}
		}
	}
	both := []*anvil.Node{a, b}
	mineAt(both, 1, 3)
	cfg := upstreamConfig(31337, a.URL, b.URL)
	cfg.MaxLag = new(uint64(1))
	pool := startPool(t, cfg, upstreams.Deps{})
	wait.Within(t, waitTimeout, "the pool's head", func() bool { return pool.Head() == 3 })
	c := newCounting(pool)
	tf := newFeed(t, c, 31337, nil)
	r := &recorder{}
	defer tf.Subscribe(r, false)()
	wait.Within(t, waitTimeout, "the feed's start", func() bool { return tf.tip() != nil })
	mineAt([]*anvil.Node{a}, 4, 6)
	r.waitHead(t, 6)

	a.Kill()
	wait.Within(t, waitTimeout, "a head poll answered by the lagging node", func() bool { return tf.metric(t, "web3gate_feed_head_block") == 3 })
	polls := c.snapshot()["latest"]
	wait.Within(t, waitTimeout, "more head polls", func() bool { return c.snapshot()["latest"] >= polls+5 })
	if evs := r.all(); evs[len(evs)-1].Block.Number != 6 {
		t.Fatalf("events after the failover: %s", describe(evs))
	}
	mineAt([]*anvil.Node{b}, 4, 5)
	wait.Within(t, waitTimeout, "a head poll at 5", func() bool { return tf.metric(t, "web3gate_feed_head_block") == 5 })
	mineAt([]*anvil.Node{b}, 6, 8)
	evs := r.waitHead(t, 8)
	checkAscending(t, evs, 4, 8)
	if got := tf.metric(t, "web3gate_feed_reorgs_total"); got != 0 {
		t.Errorf("web3gate_feed_reorgs_total = %v, want 0: the nodes' blocks are the same", got)
	}
}
