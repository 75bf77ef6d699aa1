package filters

import (
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// transferTopic is topic 0 of ERC-20 and ERC-721 Transfer events.
var transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// addrTopic is an address as an indexed topic.
func addrTopic(a common.Address) common.Hash { return common.BytesToHash(a.Bytes()) }

// TestBlockFilter: a block filter reports every block added after its creation exactly once,
// in order, across polls made while blocks are mined (each as soon as the feed saw it);
// nothing reaches the upstream as a filter method.
func TestBlockFilter(t *testing.T) {
	n := devNode(t)
	r := newReplica(t, n, testStore(t, store.DriverSQLite), Config{})
	start := n.head()
	id := r.newFilter(alice, nil)

	var got []string
	done := make(chan uint64)
	go func() {
		var last uint64
		for range 12 {
			last = n.mine()
		}
		done <- last
	}()
	polls := 0
	var last uint64
	for last == 0 {
		select {
		case last = <-done:
		case <-time.After(15 * time.Millisecond):
		}
		got = append(got, r.blockChanges(alice, id)...)
		polls++
	}
	if !slices.Contains(got, n.hash(last)) {
		got = append(got, r.blocksUntil(alice, id, n.hash(last))...)
	}
	n.checkEveryBlockOnce([][]string{got}, start+1)
	// Sequential polls: in chain order too.
	if i := slices.Index(n.hashes(1, n.head()), got[0]); !slices.Equal(got, n.hashes(uint64(i)+1, uint64(i+len(got)))) {
		t.Fatalf("over %d polls the filter reported %v: not the chain's blocks in order", polls, got)
	}
	for _, m := range r.forwarded() {
		if strings.Contains(m, "Filter") {
			t.Fatalf("%s reached the upstream", m)
		}
	}
	if v := testutil.ToFloat64(r.stage.polls[pollChanges]); v < 1 {
		t.Fatalf("web3gate_filter_polls_total{outcome=\"changes\"} = %v", v)
	}
}

// TestLogFilter: a logs filter reports the logs of new blocks that match its address and
// topics, and no other; its numeric block range bounds what its polls report; eth_getFilterLogs
// is an eth_getLogs with its criteria, passed on to the upstream.
func TestLogFilter(t *testing.T) {
	n := devNode(t)
	r := newReplica(t, n, testStore(t, store.DriverSQLite), Config{})
	erc20 := contracts.MustLoad("TestERC20")
	tokenA := n.deploy(erc20, "A", "A", uint8(18))
	tokenB := n.deploy(erc20, "B", "B", uint8(18))
	to, other := n.addrs[1], n.addrs[2]

	// Transfers of token A to `to`, from any block on.
	matching := r.newFilter(alice, map[string]any{
		"address": tokenA, "topics": []any{transferTopic, nil, addrTopic(to)}, "fromBlock": "earliest",
	})
	// Either token, any transfer, but only up to the current block: nothing new ever.
	past := n.head()
	bounded := r.newFilter(alice, map[string]any{
		"address": []common.Address{tokenA, tokenB}, "fromBlock": "0x1", "toBlock": hexutil.EncodeUint64(past),
	})
	// Either token, any log.
	both := r.newFilter(alice, map[string]any{"address": []common.Address{tokenA, tokenB}})

	want := n.transact(erc20, tokenA, "mint", to, big.NewInt(5))
	n.transact(erc20, tokenA, "mint", other, big.NewInt(6)) // topic 2 differs
	n.transact(erc20, tokenB, "mint", to, big.NewInt(7))    // address differs

	// Once the filter of both tokens has reported the three mints, the feed has seen their
	// blocks: the others' polls then report all they ever will of them.
	if ls := r.logsUntil(alice, both, 3); len(ls) != 3 || ls[0].Address != tokenA || ls[1].Address != tokenA || ls[2].Address != tokenB {
		t.Fatalf("filter of both tokens reported %+v, want the 3 mints in order", ls)
	}
	ls := r.logChanges(alice, matching)
	if len(ls) != 1 {
		t.Fatalf("matching filter reported %d logs, want 1: %+v", len(ls), ls)
	}
	l := ls[0]
	if l.Address != tokenA || *l.Removed || l.TxHash != want.TxHash || l.BlockHash != want.BlockHash ||
		!slices.Equal(l.Topics, []common.Hash{transferTopic, {}, addrTopic(to)}) {
		t.Fatalf("log %+v, want token A's mint to %s in tx %s", l, to, want.TxHash)
	}
	if ls := r.logChanges(alice, matching); len(ls) != 0 {
		t.Fatalf("second poll = %+v, want []", ls)
	}
	if ls := r.logChanges(alice, bounded); len(ls) != 0 {
		t.Fatalf("filter bounded by toBlock %d reported %+v", past, ls)
	}

	// eth_getFilterLogs: every matching log from block 0, through the upstream as eth_getLogs.
	r.forwarded()
	res := r.must(alice, "eth_getFilterLogs", matching)
	var all []rpcLog
	if err := json.Unmarshal(res, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].TxHash != want.TxHash {
		t.Fatalf("eth_getFilterLogs = %s, want the one mint to %s", res, to)
	}
	if fw := r.forwarded(); !slices.Equal(fw, []string{"eth_getLogs"}) {
		t.Fatalf("eth_getFilterLogs reached the upstream as %v, want [eth_getLogs]", fw)
	}
	// A block filter has no logs: not found, as geth answers.
	blocks := r.newFilter(alice, nil)
	_, err := r.call(alice, "eth_getFilterLogs", blocks)
	wantError(t, "eth_getFilterLogs of a block filter", err, -32000, "filter not found")
}

// TestFilterOwnership: a filter is its owner's, on its chain: anyone else's poll, logs or
// uninstall finds nothing; the owner uninstalls it once.
func TestFilterOwnership(t *testing.T) {
	n := devNode(t)
	r := newReplica(t, n, testStore(t, store.DriverSQLite), Config{})
	id := r.newFilter(alice, map[string]any{"topics": []any{transferTopic}})
	byClient := r.newFilter(app, nil)
	otherChain := alice
	otherChain.chain = n.chainID + 1
	for _, who := range []caller{bob, app, otherChain} {
		for _, m := range []string{"eth_getFilterChanges", "eth_getFilterLogs"} {
			_, err := r.call(who, m, id)
			wantError(t, m+" by another owner or chain", err, -32000, "filter not found")
		}
		if res := r.must(who, "eth_uninstallFilter", id); string(res) != "false" {
			t.Fatalf("eth_uninstallFilter by another owner or chain = %s, want false", res)
		}
	}
	// A client without a principal owns its filters by its client id.
	if res := r.must(app, "eth_getFilterChanges", byClient); string(res) != "[]" {
		t.Fatalf("the client's own filter = %s", res)
	}
	_, err := r.call(alice, "eth_getFilterChanges", byClient)
	wantError(t, "a client's filter polled by a principal", err, -32000, "filter not found")

	for _, tc := range []struct{ name, params string }{
		{"unknown id", `["0x0123456789abcdef0123456789abcdef"]`},
		{"uppercase id", `["` + strings.ToUpper(id) + `"]`},
		{"short id", `["0x01"]`},
		{"not hex", `["filter"]`},
	} {
		_, err := r.callRaw(alice, "eth_getFilterChanges", tc.params)
		wantError(t, tc.name, err, -32000, "filter not found")
	}
	for _, tc := range []struct{ name, params string }{
		{"no id", `[]`},
		{"a number", `[1]`},
		{"two ids", `["` + id + `","` + id + `"]`},
		{"not an array", `{"id":"` + id + `"}`},
	} {
		_, err := r.callRaw(alice, "eth_getFilterChanges", tc.params)
		wantError(t, tc.name, err, -32602, "")
	}

	if res := r.must(alice, "eth_uninstallFilter", id); string(res) != "true" {
		t.Fatalf("eth_uninstallFilter by the owner = %s, want true", res)
	}
	if res := r.must(alice, "eth_uninstallFilter", id); string(res) != "false" {
		t.Fatalf("second eth_uninstallFilter = %s, want false", res)
	}
	_, err = r.call(alice, "eth_getFilterChanges", id)
	wantError(t, "poll after uninstall", err, -32000, "filter not found")
}

// TestFilterRequests: what eth_newFilter refuses, pending transaction filters, and the limit
// of filters per client.
func TestFilterRequests(t *testing.T) {
	n := devNode(t)
	r := newReplica(t, n, testStore(t, store.DriverSQLite), Config{MaxPerClient: 2})
	_, err := r.call(alice, "eth_newPendingTransactionFilter")
	wantError(t, "eth_newPendingTransactionFilter", err, -32601, "eth_newPendingTransactionFilter is not offered on this chain")

	for _, tc := range []struct{ name, params, want string }{
		{"no criteria", `[]`, "missing value for required argument 0"},
		{"pending", `[{"fromBlock":"pending"}]`, "pending logs are not supported"},
		{"latest to a number", `[{"toBlock":"0x5"}]`, "invalid from and to block combination"},
		{"backwards", `[{"fromBlock":"0x5","toBlock":"0x4"}]`, "invalid from and to block combination"},
		{"finalized", `[{"fromBlock":"finalized"}]`, "invalid from and to block combination"},
		{"two params", `[{},{}]`, "too many arguments, want at most 1"},
	} {
		_, err := r.callRaw(alice, "eth_newFilter", tc.params)
		wantError(t, "eth_newFilter "+tc.name, err, -32602, tc.want)
	}
	_, err = r.callRaw(alice, "eth_newBlockFilter", `[1]`)
	wantError(t, "eth_newBlockFilter with a param", err, -32602, "too many arguments, want at most 0")

	r.newFilter(alice, nil)
	r.newFilter(alice, map[string]any{})
	_, err = r.call(alice, "eth_newBlockFilter")
	wantError(t, "a filter past filters.maxPerClient", err, -32005, "too many filters: 2 live filters per client (filters.maxPerClient)")
	r.newFilter(bob, nil) // another owner's count
	for _, m := range r.forwarded() {
		if strings.Contains(m, "Filter") {
			t.Fatalf("%s reached the upstream", m)
		}
	}
}

// TestFilterExpiry: a filter not polled for filters.ttl is gone; one polled within it lives
// on; the sweeper deletes the expired one and counts the live ones.
func TestFilterExpiry(t *testing.T) {
	n := devNode(t)
	db := testStore(t, store.DriverSQLite)
	r := newReplica(t, n, db, Config{TTL: time.Second})
	idle := r.newFilter(alice, nil)
	polled := r.newFilter(alice, nil)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		r.blockChanges(alice, polled)
		time.Sleep(200 * time.Millisecond)
	}
	_, err := r.call(alice, "eth_getFilterChanges", idle)
	wantError(t, "poll after the ttl", err, -32000, "filter not found")
	r.blockChanges(alice, polled)
	if res := r.must(alice, "eth_uninstallFilter", idle); string(res) != "false" {
		t.Fatalf("uninstall of an expired filter = %s, want false", res)
	}
	// The sweeper deletes the expired row and the gauge counts the live one.
	wait.For(t, "the sweeper deletes the expired filter", func() bool {
		var rows int
		if err := db.ReadOne(t.Context(), func(tx *store.DBTx) error {
			return tx.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM filters`).Scan(&rows)
		}); err != nil {
			t.Fatal(err)
		}
		return rows == 1 && testutil.ToFloat64(r.stage.alive.WithLabelValues("test")) == 1
	})
}

// TestFilterDropped: a poll over more than filters.maxLogs logs, or more than
// filters.maxBlocks blocks, drops the filter: that poll says why and which key to raise,
// later polls find nothing. A poll at the limits is answered.
func TestFilterDropped(t *testing.T) {
	n := devNode(t)
	r := newReplica(t, n, testStore(t, store.DriverSQLite), Config{MaxLogs: 4, MaxBlocks: 3})
	emitter := contracts.MustLoad("TransferEmitter")
	at := n.deploy(emitter)

	atLimit := r.newFilter(alice, map[string]any{"address": at})
	overLogs := r.newFilter(alice, map[string]any{"address": at})
	overBlocks := r.newFilter(alice, nil)
	// probe is polled until it reports what overLogs and overBlocks are then polled for
	// once: the feed has seen it (it reports a block up to a poll interval after the node).
	probe := r.newFilter(alice, map[string]any{"address": at})
	n.transact(emitter, at, "mint721", big.NewInt(0), big.NewInt(4), big.NewInt(3))
	r.logsUntil(alice, probe, 4)
	if ls := r.logChanges(alice, atLimit); len(ls) != 4 {
		t.Fatalf("poll of 4 logs with maxLogs 4 = %d logs", len(ls))
	}
	n.transact(emitter, at, "mint721", big.NewInt(10), big.NewInt(1), big.NewInt(3))
	r.logsUntil(alice, probe, 1)
	_, err := r.call(alice, "eth_getFilterChanges", overLogs)
	wantError(t, "poll of 5 logs with maxLogs 4", err, -32000, "filter dropped: more than 4 logs since the previous poll (filters.maxLogs)")
	_, err = r.call(alice, "eth_getFilterChanges", overLogs)
	wantError(t, "poll after the drop", err, -32000, "filter not found")
	if res := r.must(alice, "eth_uninstallFilter", overLogs); string(res) != "false" {
		t.Fatalf("uninstall of a dropped filter = %s, want false", res)
	}

	// Two blocks (the mints) since overBlocks was made, then two more: 4 > 3.
	blockProbe := r.newFilter(alice, nil)
	n.mine()
	last := n.mine()
	r.blocksUntil(alice, blockProbe, n.hash(last))
	_, err = r.call(alice, "eth_getFilterChanges", overBlocks)
	wantError(t, "poll of 4 blocks with maxBlocks 3", err, -32000, "filter dropped: more than 3 new blocks since the previous poll (filters.maxBlocks)")
	_, err = r.call(alice, "eth_getFilterChanges", overBlocks)
	wantError(t, "poll after the drop", err, -32000, "filter not found")
	if v := testutil.ToFloat64(r.stage.polls[pollDropped]); v != 2 {
		t.Fatalf("web3gate_filter_polls_total{outcome=\"dropped\"} = %v, want 2", v)
	}
	if v := testutil.ToFloat64(r.stage.polls[pollNotFound]); v != 2 {
		t.Fatalf("web3gate_filter_polls_total{outcome=\"not_found\"} = %v, want 2", v)
	}
}

// TestFilterReplicas: two replicas (each its own upstream pool, feed and stage) on one
// PostgreSQL store: a filter made through one is polled through the other, and polls through
// both at once, while blocks are mined, report every block exactly once between them.
func TestFilterReplicas(t *testing.T) {
	n := devNode(t)
	pg := store.Config{Driver: store.DriverPostgres, DSN: testengine.Postgres(t)}
	a := newReplica(t, n, openStore(t, pg), Config{})
	b := newReplica(t, n, openStore(t, pg), Config{})
	id := a.newFilter(alice, nil)
	first := n.mine()
	got := [][]string{b.blocksUntil(alice, id, n.hash(first))}
	got = append(got, a.blockChanges(alice, id)) // after b's: not block first again
	var (
		mu     sync.Mutex
		failed []*jsonrpc.Error
		wg     sync.WaitGroup
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			n.mine()
		}
	}()
	for _, r := range []*replica{a, b, a, b} {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				// Not blockChanges: t.Fatal only on the test's goroutine.
				res, err := r.call(alice, "eth_getFilterChanges", id)
				var hs []string
				if err == nil && json.Unmarshal(res, &hs) != nil {
					err = &jsonrpc.Error{Message: "not an array of hashes: " + string(res)}
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else if len(hs) > 0 {
					got = append(got, hs)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range failed {
		t.Fatalf("a concurrent poll failed: %d %s", err.Code, err.Message)
	}
	// The last blocks, once the feeds have seen them, through either replica.
	end := n.head()
	if !slices.Contains(slices.Concat(got...), n.hash(end)) {
		got = append(got, a.blocksUntil(alice, id, n.hash(end)))
	}
	got = append(got, b.blockChanges(alice, id))
	n.checkEveryBlockOnce(got, first)
}
