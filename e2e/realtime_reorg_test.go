package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	gethrpc "github.com/ethereum/go-ethereum/rpc"
)

// TestRealtimeReorg reorganizes anvil's chain under web3gate (anvil_snapshot, three blocks
// with Transfer events, anvil_revert, then a longer branch of five blocks with other events)
// and follows it with go-ethereum's ethclient over ws:// (SubscribeNewHead and
// SubscribeFilterLogs) and with HTTP filters (eth_newFilter and eth_newBlockFilter polled with
// eth_getFilterChanges). As geth does: the subscription and the log filter give the old
// branch's logs again with "removed": true (oldest first), then the new branch's logs; the
// heads are the old branch's then the new branch's; the block filter gives the new branch's
// hashes. Nothing is given twice.
func TestRealtimeReorg(t *testing.T) {
	node := realtimeAnvil(t)
	d := newChainDriver(t, node)
	token := d.deploy(erc20, "Reorg", "ORG", uint8(18))
	base := d.mine(0)

	g := startGateway(t, realtimeConfig("", node.URL))
	waitReady(t, g)
	sub := watchGeth(t, "go-ethereum ws", wsURL(g, "/v1/web3/mainnet"),
		map[string]string{"X-API-Key": "e2e", "Authorization": "Bearer e2e-token"}, true, token)
	c := dialGateway(t, g.API+"/v1/web3/mainnet", e2eCreds)
	var logFilter, blockFilter string
	if err := rpcCall(c, &logFilter, "eth_newFilter", map[string]any{"address": token, "topics": []any{transferTopic}}); err != nil {
		t.Fatalf("eth_newFilter: %s", describeErr(err))
	}
	if err := rpcCall(c, &blockFilter, "eth_newBlockFilter"); err != nil {
		t.Fatalf("eth_newBlockFilter: %s", describeErr(err))
	}
	logPoll := &filterPoll{t: t, c: c, id: logFilter}
	blockPoll := &filterPoll{t: t, c: c, id: blockFilter}

	// The old branch.
	var snap string
	if err := json.Unmarshal(d.call("anvil_snapshot"), &snap); err != nil {
		t.Fatal(err)
	}
	d.mint(token, freshAddress(), 1)
	d.mint(token, freshAddress(), 2)
	old := []nodeBlock{d.mine(0)}
	d.mint(token, freshAddress(), 3)
	old = append(old, d.mine(0), d.mine(0))
	oldLogs := d.transfers(token, uint64(base.Number)+1, uint64(old[2].Number))
	if len(oldLogs) != 3 {
		t.Fatalf("the old branch has %d Transfer logs, want 3", len(oldLogs))
	}
	waitSeen(t, []watcher{sub}, uint64(old[2].Number), len(oldLogs), 20*time.Second)
	if got := logPoll.logsUntil(len(oldLogs)); !slices.Equal(got, oldLogs) {
		t.Fatalf("log filter before the reorg: %v, want %v", got, oldLogs)
	}
	if got := blockPoll.hashesUntil(len(old)); !slices.Equal(got, hashes(old)) {
		t.Fatalf("block filter before the reorg: %v, want %v", got, hashes(old))
	}

	// The new branch: from the same parent, longer, other events (and timestamps).
	var reverted bool
	if err := json.Unmarshal(d.call("anvil_revert", snap), &reverted); err != nil || !reverted {
		t.Fatalf("anvil_revert %s: %v %v", snap, reverted, err)
	}
	d.resync()
	if d.latest(node).Hash != base.Hash {
		t.Fatalf("after anvil_revert the head is not block %d", base.Number)
	}
	d.mint(token, freshAddress(), 10)
	branch := []nodeBlock{d.mine(1)}
	branch = append(branch, d.mine(0))
	d.mint(token, freshAddress(), 11)
	d.mint(token, freshAddress(), 12)
	branch = append(branch, d.mine(0))
	d.mint(token, freshAddress(), 13)
	branch = append(branch, d.mine(0), d.mine(0))
	for i := range old {
		if branch[i].Hash == old[i].Hash {
			t.Fatalf("block %d is the same on both branches", old[i].Number)
		}
	}
	newLogs := d.transfers(token, uint64(base.Number)+1, uint64(branch[4].Number))
	if len(newLogs) != 4 {
		t.Fatalf("the new branch has %d Transfer logs, want 4", len(newLogs))
	}
	removed := make([]seenLog, len(oldLogs))
	for i, l := range oldLogs {
		l.Removed = true
		removed[i] = l
	}

	waitSeen(t, []watcher{sub}, uint64(branch[4].Number), 2*len(oldLogs)+len(newLogs), 20*time.Second)
	s := sub.stop(t)
	for _, e := range s.errs {
		t.Errorf("subscription: %s", e)
	}
	checkLogs(t, "subscription", s.logs, slices.Concat(oldLogs, removed, newLogs))
	if want := slices.Concat(asSeen(old), asSeen(branch)); !slices.Equal(s.blocks, want) {
		t.Errorf("subscription: heads\n  got  %v\n  want %v (the old branch's, then the new one's)", s.blocks, want)
	}

	checkLogs(t, "log filter after the reorg", logPoll.logsUntil(len(removed)+len(newLogs)), slices.Concat(removed, newLogs))
	if got := blockPoll.hashesUntil(len(branch)); !slices.Equal(got, hashes(branch)) {
		t.Errorf("block filter after the reorg: %v, want the new branch %v", got, hashes(branch))
	}
	time.Sleep(time.Second)
	if got := logPoll.logsUntil(0); len(got) != 0 {
		t.Errorf("log filter: %v given again", got)
	}
	if got := blockPoll.hashesUntil(0); len(got) != 0 {
		t.Errorf("block filter: %v given again", got)
	}
	t.Logf("feed: reorgs %v; upstream calls %v", metricValues(t, g, "web3gate_feed_reorgs_total"), metricValues(t, g, "web3gate_feed_upstream_calls_total"))
}

// filterPoll polls one HTTP filter of web3gate with eth_getFilterChanges.
type filterPoll struct {
	t  *testing.T
	c  *gethrpc.Client
	id string
}

// changes is one eth_getFilterChanges of the filter, decoded into out.
func (p *filterPoll) changes(out any) {
	p.t.Helper()
	if err := rpcCall(p.c, out, "eth_getFilterChanges", p.id); err != nil {
		p.t.Fatalf("eth_getFilterChanges %s: %s", p.id, describeErr(err))
	}
}

// logsUntil polls (every 100 ms, for at most 15 s) until the log filter has given n logs,
// and returns them all (at least one poll, so n = 0 is what one poll gives).
func (p *filterPoll) logsUntil(n int) []seenLog {
	p.t.Helper()
	var got []seenLog
	deadline := time.Now().Add(15 * time.Second)
	for {
		var logs []types.Log
		p.changes(&logs)
		for _, l := range logs {
			got = append(got, seenLog{Block: l.BlockNumber, Tx: l.TxHash, Index: l.Index, Removed: l.Removed})
		}
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hashesUntil is logsUntil for a block filter.
func (p *filterPoll) hashesUntil(n int) []common.Hash {
	p.t.Helper()
	var got []common.Hash
	deadline := time.Now().Add(15 * time.Second)
	for {
		var hs []common.Hash
		p.changes(&hs)
		got = append(got, hs...)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hashes is the blocks' hashes.
func hashes(bs []nodeBlock) []common.Hash {
	out := make([]common.Hash, len(bs))
	for i, b := range bs {
		out[i] = b.Hash
	}
	return out
}

// asSeen is the blocks as a client sees heads.
func asSeen(bs []nodeBlock) []seenBlock {
	out := make([]seenBlock, len(bs))
	for i, b := range bs {
		out[i] = seenBlock{Number: uint64(b.Number), Hash: b.Hash}
	}
	return out
}
