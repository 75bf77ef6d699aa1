package filters

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// recordingCharger records what the stage asks to charge, and refuses it while refuse is set.
type recordingCharger struct {
	mu      sync.Mutex
	refuse  bool
	charged []string // "method as-method as-params"
}

func (r *recordingCharger) ChargeAs(c *proxy.Call, as *jsonrpc.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.charged = append(r.charged, c.Method()+" "+as.Method+" "+string(as.Params))
	if r.refuse {
		return jsonrpc.ErrLimitExceeded.With("limit exceeded: test")
	}
	return nil
}

// take returns what was charged since the last take, and sets refuse for what follows.
func (r *recordingCharger) take(refuse bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.charged
	r.charged, r.refuse = nil, refuse
	return out
}

// TestFilterCharges: on anvil (exact empty blocks), a logs filter's poll is charged as
// eth_getLogs over the blocks it covers, within the filter's range, once per call; a refused
// poll answers -32005 and leaves the cursor, so that the next poll covers the same blocks;
// a poll of no new block and a block filter's polls are not charged more; eth_getFilterLogs
// is charged as the eth_getLogs of the criteria, and a refused one reaches no node.
func TestFilterCharges(t *testing.T) {
	n := anvilNode(t)
	ch := &recordingCharger{}
	r := newChargedReplica(t, n, testStore(t, store.DriverSQLite), Config{}, ch)
	addr := common.HexToAddress("0x00000000000000000000000000000000000000a1")
	h0 := n.head()
	open := r.newFilter(alice, map[string]any{"address": addr})
	bounded := r.newFilter(alice, map[string]any{"address": addr, "fromBlock": hexutil.EncodeUint64(h0 + 2), "toBlock": hexutil.EncodeUint64(h0 + 3)})
	blocks := r.newFilter(alice, nil)
	var last uint64
	for range 5 {
		last = n.mine()
	}
	r.blocksUntil(alice, blocks, n.hash(last))
	if got := ch.take(true); len(got) != 0 {
		t.Fatalf("creating filters and polling a block filter charged %q", got)
	}
	span := func(from, to uint64) string {
		return fmt.Sprintf(`eth_getFilterChanges eth_getLogs [{"fromBlock":"%s","toBlock":"%s"}]`, hexutil.EncodeUint64(from), hexutil.EncodeUint64(to))
	}

	_, err := r.call(alice, "eth_getFilterChanges", open)
	wantError(t, "refused poll", err, -32005, "limit exceeded")
	if got, want := ch.take(false), span(h0+1, last); len(got) != 1 || got[0] != want {
		t.Fatalf("refused poll charged %q, want [%s]", got, want)
	}
	if ls := r.logChanges(alice, open); len(ls) != 0 {
		t.Fatalf("poll: %+v", ls)
	}
	if got, want := ch.take(false), span(h0+1, last); len(got) != 1 || got[0] != want {
		t.Fatalf("the poll after a refused one charged %q, want [%s]: the cursor moved", got, want)
	}
	if ls := r.logChanges(alice, open); len(ls) != 0 {
		t.Fatalf("poll: %+v", ls)
	}
	if got := ch.take(false); len(got) != 0 {
		t.Fatalf("a poll of no new block charged %q", got)
	}
	r.logChanges(alice, bounded)
	if got, want := ch.take(false), span(h0+2, h0+3); len(got) != 1 || got[0] != want {
		t.Fatalf("bounded filter's poll charged %q, want [%s]", got, want)
	}
	r.logChanges(alice, bounded)
	last = n.mine()
	r.blocksUntil(alice, blocks, n.hash(last))
	r.logChanges(alice, bounded)
	if got := ch.take(true); len(got) != 0 {
		t.Fatalf("polls of blocks past the bounded filter's toBlock charged %q", got)
	}

	r.forwarded()
	_, err = r.call(alice, "eth_getFilterLogs", open)
	wantError(t, "refused eth_getFilterLogs", err, -32005, "limit exceeded")
	got := ch.take(false)
	if len(got) != 1 || !strings.HasPrefix(got[0], `eth_getFilterLogs eth_getLogs [{"address":["`+strings.ToLower(addr.Hex())+`"]`) {
		t.Fatalf("eth_getFilterLogs charged %q, want its criteria as eth_getLogs", got)
	}
	if fw := r.forwarded(); len(fw) != 0 {
		t.Fatalf("a refused eth_getFilterLogs reached the node: %v", fw)
	}
	r.must(alice, "eth_getFilterLogs", open)
	if fw := r.forwarded(); len(fw) != 1 || fw[0] != "eth_getLogs" {
		t.Fatalf("eth_getFilterLogs reached the node as %v", fw)
	}
}
