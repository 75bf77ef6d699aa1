package upstreams

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// logger is the address of a contract (set with anvil_setCode) that logs its calldata:
// CALLDATACOPY to memory 0, LOG0 of it.
const (
	logger     = "0x00000000000000000000000000000000000010aa"
	loggerCode = "0x366000600037366000a000"
	sender     = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266" // anvil's first account
)

// logsChain starts anvil with txs calls of logger, each in a block of its own followed by
// gap empty blocks, and returns it with its head.
func logsChain(t *testing.T, txs, gap int) (*anvil.Node, uint64) {
	t.Helper()
	// No automine: anvil mines a sent transaction from a task of its own, after the call
	// answered, so with automine the head could pass the one read below (an extra empty
	// block, seen under load). Each transaction is mined here with its gap, by anvil_mine.
	a := anvil.Start(t, 31337, "--no-mining")
	if _, err := a.Call("anvil_setCode", logger, loggerCode); err != nil {
		t.Fatal(err)
	}
	for i := range txs {
		tx := map[string]string{"from": sender, "to": logger, "data": fmt.Sprintf("0x%064x", i+1)}
		if _, err := a.Call("eth_sendTransaction", tx); err != nil {
			t.Fatalf("tx %d: %v", i, err)
		}
		if _, err := a.Call("anvil_mine", "0x"+strconv.FormatInt(int64(1+gap), 16)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := a.Call("eth_blockNumber")
	if err != nil {
		t.Fatal(err)
	}
	head, err := parseHexQuantity(res)
	if err != nil {
		t.Fatal(err)
	}
	return a, head
}

func logsParams(from, to string, extra string) []byte {
	return []byte(`[{"fromBlock":"` + from + `","toBlock":"` + to + `"` + extra + `}]`)
}

// waitHead waits until the pool's head is head; when it is not within wait.Limit, the test
// fails and logs every node's state, which says why (not verified, ejected, another head).
func waitHead(t *testing.T, p *Pool, head uint64) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("nodes: %+v", p.Nodes())
		}
	}()
	wait.For(t, fmt.Sprintf("the pool at the node's head %d", head), func() bool { return p.Head() == head })
}

func hexBlock(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

// direct is the node's own answer to eth_getLogs over params, unsplit.
func direct(t *testing.T, a *anvil.Node, params []byte) string {
	t.Helper()
	var args []any
	if err := json.Unmarshal(params, &args); err != nil {
		t.Fatal(err)
	}
	res, err := a.Call("eth_getLogs", args...)
	if err != nil {
		t.Fatalf("direct eth_getLogs: %v", err)
	}
	return string(res)
}

func (s testSet) logsMetric(t *testing.T, name string) int {
	t.Helper()
	return int(s.metricValue(t, "web3gate_upstream_getlogs_"+name+"_total", map[string]string{"chain": "anvil"}))
}

// TestGetLogsSplitMatchesUnsplit: a range of many chunks is fetched chunk by chunk and the
// joined answer is byte for byte the node's answer to the whole range; ranges within the
// chunk size, and the blockHash form, go as they came.
func TestGetLogsSplitMatchesUnsplit(t *testing.T) {
	a, head := logsChain(t, 120, 4) // 600 blocks, 120 logs
	px := newNodeProxy(t, a, 0)
	cfg := anvilConfig(px)
	cfg.GetLogs = GetLogsConfig{MaxRange: 100_000, ChunkSize: 50, Concurrency: 4}
	s := startSet(t, cfg, Deps{})
	p := s.anvilPool(t)
	waitHead(t, p, head)

	chunks := int(head/50) + 1
	for _, tc := range []struct {
		name   string
		params []byte
	}{
		{"numbers, by address", logsParams("0x0", hexBlock(head), `,"address":"`+logger+`"`)},
		{"earliest to latest, every log", logsParams("earliest", "latest", "")},
		{"absent bounds' defaults as members in other case", []byte(`[{"FromBlock":"0x0","TOBLOCK":"latest","topics":[]}]`)},
		{"past the head: the node's own bound", logsParams("0x0", hexBlock(head+500), "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, sent := s.logsMetric(t, "chunks"), px.count("eth_getLogs")
			got, err := p.Forward(context.Background(), "eth_getLogs", tc.params)
			if err != nil {
				t.Fatal(err)
			}
			want := direct(t, a, logsParams("0x0", hexBlock(head), ""))
			if strings.Contains(string(tc.params), "address") {
				want = direct(t, a, tc.params)
			}
			if string(got) != want {
				t.Fatalf("joined answer differs from the node's:\n got %.300s\nwant %.300s", got, want)
			}
			var logs []json.RawMessage
			if err := json.Unmarshal(got, &logs); err != nil || len(logs) != 120 {
				t.Fatalf("%d logs (%v), want 120", len(logs), err)
			}
			if n := s.logsMetric(t, "chunks") - before; n != chunks {
				t.Errorf("chunks = %d, want %d", n, chunks)
			}
			if n := px.count("eth_getLogs") - sent; n != chunks {
				t.Errorf("the node got %d eth_getLogs, want %d", n, chunks)
			}
		})
	}
	if got := s.logsMetric(t, "split"); got != 4 {
		t.Errorf("split calls = %d, want 4", got)
	}

	t.Run("within a chunk, and blockHash, unsplit", func(t *testing.T) {
		before, sent := s.logsMetric(t, "chunks"), px.count("eth_getLogs")
		small := logsParams("0x5", "0x36", "") // 50 blocks
		got, err := p.Forward(context.Background(), "eth_getLogs", small)
		if err != nil || string(got) != direct(t, a, small) {
			t.Fatalf("small range: %.200s, %v", got, err)
		}
		blk, err := a.Call("eth_getBlockByNumber", "0x1", false)
		if err != nil {
			t.Fatal(err)
		}
		var b struct{ Hash string }
		if err := json.Unmarshal(blk, &b); err != nil {
			t.Fatal(err)
		}
		byHash := []byte(`[{"blockHash":"` + b.Hash + `"}]`)
		got, err = p.Forward(context.Background(), "eth_getLogs", byHash)
		if err != nil || string(got) != direct(t, a, byHash) {
			t.Fatalf("blockHash: %.200s, %v", got, err)
		}
		if n := s.logsMetric(t, "chunks") - before; n != 0 {
			t.Errorf("chunks = %d, want 0", n)
		}
		if n := px.count("eth_getLogs") - sent; n != 2 {
			t.Errorf("the node got %d eth_getLogs, want 2", n)
		}
	})
}

// TestGetLogsRefusingNodeHalves: a node that refuses more than 20 blocks (as Infura refuses
// too many results) gets each refused range halved until it passes, the answer is still the
// node's whole answer, and the size it took is kept for later calls: no refusal then.
func TestGetLogsRefusingNodeHalves(t *testing.T) {
	a, head := logsChain(t, 40, 4) // 200 blocks
	px := newNodeProxy(t, a, 0)
	px.maxRange.Store(20)
	cfg := anvilConfig(px)
	cfg.GetLogs = GetLogsConfig{MaxRange: 100_000, ChunkSize: 64, Concurrency: 3}
	s := startSet(t, cfg, Deps{})
	p := s.anvilPool(t)
	wait.For(t, "the node in rotation", p.healthy)

	// Within the chunk size, refused: split in halves, 40 → 20.
	small := logsParams("0x1", "0x28", "")
	got, err := p.Forward(context.Background(), "eth_getLogs", small)
	if err != nil || string(got) != direct(t, a, small) {
		t.Fatalf("40 blocks: %.200s, %v", got, err)
	}
	if px.refused.Load() != 1 || s.logsMetric(t, "halvings") != 1 {
		t.Fatalf("refusals %d, halvings %d: want 1, 1", px.refused.Load(), s.logsMetric(t, "halvings"))
	}
	if span := p.logs.span(p.nodes[0]); span != 20 {
		t.Fatalf("learned chunk size = %d, want 20", span)
	}

	whole := logsParams("0x0", hexBlock(head), "")
	refused := px.refused.Load()
	got, err = p.Forward(context.Background(), "eth_getLogs", whole)
	if err != nil || string(got) != direct(t, a, whole) {
		t.Fatalf("whole range: %.200s, %v", got, err)
	}
	if n := px.refused.Load() - refused; n != 0 {
		t.Errorf("%d refusals after the node's size was learned", n)
	}
	if got, want := s.logsMetric(t, "chunks"), 2+int(head/20)+1; got != want {
		t.Errorf("chunks = %d, want %d (2 halves, then chunks of 20)", got, want)
	}

	// Past the head: the last chunk asks up to the client's bound, is refused for its
	// nominal size, and is asked again up to the head.
	past := logsParams("0x0", hexBlock(head+1000), "")
	refused = px.refused.Load()
	got, err = p.Forward(context.Background(), "eth_getLogs", past)
	if err != nil || string(got) != direct(t, a, whole) {
		t.Fatalf("range past the head: %.200s, %v", got, err)
	}
	if n := px.refused.Load() - refused; n != 1 {
		t.Errorf("%d refusals past the head, want 1 (the last chunk's nominal range)", n)
	}

	// A larger chunk size in a new pool: each 64-block chunk is refused, halved twice.
	cfg.GetLogs.ChunkSize = 64
	s2 := startSet(t, cfg, Deps{})
	p2 := s2.anvilPool(t)
	wait.For(t, "the node in rotation", p2.healthy)
	refused = px.refused.Load()
	got, err = p2.Forward(context.Background(), "eth_getLogs", whole)
	if err != nil || string(got) != direct(t, a, whole) {
		t.Fatalf("whole range, new pool: %.200s, %v", got, err)
	}
	if px.refused.Load() == refused || s2.logsMetric(t, "halvings") == 0 {
		t.Errorf("no refusal or halving with chunks of 64 over a node taking 20")
	}
	if span := p2.logs.span(p2.nodes[0]); span != 16 {
		t.Errorf("learned chunk size = %d, want 16 (64 halved twice)", span)
	}
}

// TestGetLogsLimits: a range over maxRange is refused without an upstream call, with -32005
// naming both sizes; a joined answer over maxResponseBytes is refused too.
func TestGetLogsLimits(t *testing.T) {
	a, head := logsChain(t, 30, 2)
	px := newNodeProxy(t, a, 0)
	cfg := anvilConfig(px)
	cfg.MaxResponseBytes = 4096
	cfg.GetLogs = GetLogsConfig{MaxRange: 1000, ChunkSize: 10, Concurrency: 2}
	s := startSet(t, cfg, Deps{})
	p := s.anvilPool(t)
	waitHead(t, p, head)

	for _, tc := range []struct {
		name, from, to string
		msg            string
	}{
		{"numbers", "0x0", "0x1000", "block range too large: 4097 blocks, at most 1000"},
		{"past the head", "0x0", "0xfffffff", "block range too large: 268435456 blocks, at most 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Forward(context.Background(), "eth_getLogs", logsParams(tc.from, tc.to, ""))
			e := asError[*jsonrpc.Error](t, err)
			if e.Code != -32005 || e.Message != tc.msg || e.Status() != 200 {
				t.Errorf("error = %d %q (HTTP %d), want -32005 %q (HTTP 200)", e.Code, e.Message, e.Status(), tc.msg)
			}
		})
	}
	if n := px.count("eth_getLogs"); n != 0 {
		t.Errorf("the node got %d eth_getLogs for refused ranges", n)
	}

	if whole := direct(t, a, logsParams("0x0", hexBlock(head), "")); len(whole) <= 4096 {
		t.Fatalf("the chain's logs take %d bytes: too few for the test", len(whole))
	}
	_, err := p.Forward(context.Background(), "eth_getLogs", logsParams("0x0", hexBlock(head), ""))
	e := asError[*jsonrpc.Error](t, err)
	if e.Code != -32005 || !strings.HasPrefix(e.Message, "eth_getLogs result too large: more than 4096 bytes") {
		t.Errorf("error = %d %q", e.Code, e.Message)
	}
}

func TestJoinLogs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
		want  string
	}{
		{"empty parts", []string{"[]", " [ ] ", "null"}, "[]"},
		{"whitespace kept inside, trimmed at the seams", []string{"[{\"a\": 1}]", "\n[ ]", "[ {\"b\":2} ,{\"c\":3}\n]"}, "[{\"a\": 1},{\"b\":2} ,{\"c\":3}]"},
		{"one part", []string{`[{"x":1}]`}, `[{"x":1}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts := make([][]byte, len(tc.parts))
			for i, p := range tc.parts {
				parts[i] = []byte(p)
			}
			got, err := joinLogs(parts, 1<<20)
			if err != nil || string(got) != tc.want {
				t.Fatalf("joinLogs = %s, %v; want %s", got, err, tc.want)
			}
			if !json.Valid(got) {
				t.Errorf("%s is not JSON", got)
			}
		})
	}
	t.Run("not an array", func(t *testing.T) {
		if _, err := joinLogs([][]byte{[]byte("[]"), []byte(`{"a":1}`)}, 1<<20); err != errLogsNotArray {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		_, err := joinLogs([][]byte{[]byte(`[1,2,3]`), []byte(`[4,5,6]`)}, 10)
		if e := asError[*jsonrpc.Error](t, err); e.Code != -32005 {
			t.Errorf("err = %v", err)
		}
	})
}

func TestLogsQueryOf(t *testing.T) {
	p := &Pool{logs: &logsConf{cfg: GetLogsConfig{MaxRange: 1000, ChunkSize: 10, Concurrency: 1}}}
	p.best.Store(500)
	for _, tc := range []struct {
		name           string
		params         string
		from, to, last uint64
	}{
		{"numbers", `[{"fromBlock":"0x10","toBlock":"0x20"}]`, 16, 32, 32},
		{"tags", `[{"fromBlock":"earliest","toBlock":"latest"}]`, 0, 500, 500},
		{"pending is the head", `[{"fromBlock":"0x1f4","toBlock":"pending"}]`, 500, 500, 500},
		{"absent bounds are latest", `[{"address":"0x01"}]`, 500, 500, 500},
		{"null bounds are latest", `[{"fromBlock":null,"toBlock":null,"blockHash":null}]`, 500, 500, 500},
		{"members in any case", `[{"FROMBLOCK":"0x1","toblock":"0x2"}]`, 1, 2, 2},
		{"past the head: chunks stop at the head", `[{"fromBlock":"0x1","toBlock":"0x300"}]`, 1, 768, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok, err := p.logsQueryOf([]byte(tc.params))
			if err != nil || !ok || q.from != tc.from || q.to != tc.to || q.last != tc.last {
				t.Fatalf("= %d..%d (last %d), %v, %v; want %d..%d (last %d)", q.from, q.to, q.last, ok, err, tc.from, tc.to, tc.last)
			}
			params, err := q.params(q.from, q.to)
			if err != nil {
				t.Fatal(err)
			}
			var back []map[string]json.RawMessage
			if err := json.Unmarshal(params, &back); err != nil || len(back) != 1 {
				t.Fatalf("params %s: %v", params, err)
			}
			for k := range back[0] {
				if strings.EqualFold(k, "fromblock") && k != "fromBlock" || strings.EqualFold(k, "toblock") && k != "toBlock" {
					t.Errorf("params keep the client's %q beside ours", k)
				}
			}
		})
	}
	for _, tc := range []struct{ name, params string }{
		{"blockHash", `[{"blockHash":"0xabc"}]`},
		{"safe", `[{"fromBlock":"0x1","toBlock":"safe"}]`},
		{"finalized", `[{"fromBlock":"finalized"}]`},
		{"leading zeros", `[{"fromBlock":"0x01","toBlock":"0x2"}]`},
		{"not hex", `[{"fromBlock":"12","toBlock":"0x2"}]`},
		{"a number", `[{"fromBlock":1,"toBlock":"0x2"}]`},
		{"from after to", `[{"fromBlock":"0x3","toBlock":"0x2"}]`},
		{"from past the head", `[{"fromBlock":"0x1f5","toBlock":"0x1f6"}]`},
		{"two params", `[{},{}]`},
		{"not an object", `["latest"]`},
		{"not JSON", `[{`},
	} {
		t.Run("unsplit: "+tc.name, func(t *testing.T) {
			if _, ok, err := p.logsQueryOf([]byte(tc.params)); ok || err != nil {
				t.Errorf("= %v, %v; want forwarded as it is", ok, err)
			}
		})
	}
	t.Run("latest before any head", func(t *testing.T) {
		p := &Pool{logs: p.logs}
		if _, ok, err := p.logsQueryOf([]byte(`[{"fromBlock":"0x0"}]`)); ok || err != nil {
			t.Errorf("= %v, %v; want forwarded as it is", ok, err)
		}
	})
}

// TestGetLogsTooManyChunks: a range the learned chunk size would cut into more than
// maxLogsChunks chunks is refused before any upstream call, naming the sizes.
func TestGetLogsTooManyChunks(t *testing.T) {
	p := &Pool{logs: &logsConf{cfg: GetLogsConfig{MaxRange: 100_000, ChunkSize: 2000, Concurrency: 1}}}
	q := logsQuery{rest: map[string]json.RawMessage{}, from: 0, to: maxLogsChunks * 2, last: maxLogsChunks * 2}
	_, err := p.splitLogs(context.Background(), &q, 2)
	e := asError[*jsonrpc.Error](t, err)
	want := "block range too large: 20001 blocks, at most 20000 in chunks of 2 the nodes take"
	if e.Code != -32005 || e.Message != want {
		t.Errorf("error = %d %q, want -32005 %q", e.Code, e.Message, want)
	}
}

// TestGetLogsLearnedSizeBoundedAndRecovers: a node's bound on the range teaches its chunk
// size, never below minChunkSize (a chunk refused at the floor is halved for that call
// only), and the size doubles back toward chunkSize once per recoverEvery; a refusal of the
// query's results (Infura's "query returned more than 10000 results") splits that call and
// teaches nothing, so one client's dense query does not change what others' cost.
func TestGetLogsLearnedSizeBoundedAndRecovers(t *testing.T) {
	a, head := logsChain(t, 40, 4) // 200 blocks
	px := newNodeProxy(t, a, 0)
	px.maxRange.Store(5)
	cfg := anvilConfig(px)
	cfg.GetLogs = GetLogsConfig{MaxRange: 100_000, ChunkSize: 64, MinChunkSize: 16, RecoverEvery: time.Minute, Concurrency: 2}
	s := startSet(t, cfg, Deps{})
	p := s.anvilPool(t)
	waitHead(t, p, head)
	now := time.Now()
	p.logs.now = func() time.Time { return now }

	whole := logsParams("0x0", hexBlock(head), "")
	got, err := p.Forward(context.Background(), "eth_getLogs", whole)
	if err != nil || string(got) != direct(t, a, whole) {
		t.Fatalf("whole range: %.200s, %v", got, err)
	}
	if span := p.logs.span(p.nodes[0]); span != 16 {
		t.Fatalf("learned chunk size = %d, want the floor 16 (the node takes 5)", span)
	}
	now = now.Add(time.Minute)
	if span := p.logs.span(p.nodes[0]); span != 32 {
		t.Fatalf("after a recoverEvery: %d, want 32", span)
	}
	now = now.Add(10 * time.Minute)
	if span := p.logs.span(p.nodes[0]); span != 64 {
		t.Fatalf("after 11 recoverEvery: %d, want chunkSize 64", span)
	}

	// Results, not the range: this call is split, the node's size is not touched.
	results := `{"code":-32005,"message":"query returned more than 10000 results"}`
	px.refusal.Store(&results)
	halvings := s.logsMetric(t, "halvings")
	got, err = p.Forward(context.Background(), "eth_getLogs", whole)
	if err != nil || string(got) != direct(t, a, whole) {
		t.Fatalf("whole range, refused for its results: %.200s, %v", got, err)
	}
	if s.logsMetric(t, "halvings") == halvings {
		t.Fatal("the call was not split")
	}
	if span := p.logs.span(p.nodes[0]); span != 64 {
		t.Fatalf("a refusal of the results changed the node's chunk size to %d", span)
	}
}

// TestGetLogsNodeErrorsPassThrough: a refusal that is not "too large" (geth's past the head,
// invalid params, an unknown message) is the client's answer as the node gave it, code,
// message and data, whether the range was within a chunk or split; and 100 of them leave the
// node's chunk size and the upstream calls of a following large eth_getLogs as they were.
func TestGetLogsNodeErrorsPassThrough(t *testing.T) {
	a, head := logsChain(t, 20, 4) // 100 blocks
	px := newNodeProxy(t, a, 0)
	cfg := anvilConfig(px)
	cfg.GetLogs = GetLogsConfig{MaxRange: 100_000, ChunkSize: 16, Concurrency: 2}
	s := startSet(t, cfg, Deps{})
	p := s.anvilPool(t)
	waitHead(t, p, head)

	whole := logsParams("0x0", hexBlock(head), "")
	// The upstream calls of one large eth_getLogs, as the pool counts them (the node's own
	// count may still see a chunk that a failed split call cancelled on its way).
	large := func() int {
		sent := s.logsMetric(t, "chunks")
		got, err := p.Forward(context.Background(), "eth_getLogs", whole)
		if err != nil || string(got) != direct(t, a, whole) {
			t.Fatalf("large eth_getLogs: %.200s, %v", got, err)
		}
		return s.logsMetric(t, "chunks") - sent
	}
	before := large()
	if want := int(head/16) + 1; before != want {
		t.Fatalf("large eth_getLogs took %d calls, want %d", before, want)
	}
	for _, e := range []string{
		`{"code":-32602,"message":"block range extends beyond current head block"}`,
		`{"code":-32602,"message":"invalid block range params","data":{"from":"0x5"}}`,
		`{"code":-32000,"message":"missing trie node 0a1b (path )"}`,
	} {
		px.maxRange.Store(1) // every range of more than a block gets e
		px.refusal.Store(&e)
		var want jsonrpc.Error
		if err := json.Unmarshal([]byte(e), &want); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			// Within a chunk (6 blocks) and split (40 blocks), reaching past the pool's head.
			from := head - 5
			if i%2 == 1 {
				from = head - 39
			}
			_, err := p.Forward(context.Background(), "eth_getLogs", logsParams(hexBlock(from), hexBlock(head+2), ""))
			got := asError[*jsonrpc.Error](t, err)
			data, _ := json.Marshal(got.Data)
			wantData, _ := json.Marshal(want.Data)
			if got.Code != want.Code || got.Message != want.Message || string(data) != string(wantData) {
				t.Fatalf("query %d: %d %q %s, want the node's %s", i, got.Code, got.Message, data, e)
			}
		}
		if span := p.logs.span(p.nodes[0]); span != 16 {
			t.Fatalf("after 100 refusals %s: chunk size %d, want 16", e, span)
		}
		px.maxRange.Store(0)
		if after := large(); after != before {
			t.Fatalf("after 100 refusals %s: the large eth_getLogs took %d calls, before %d", e, after, before)
		}
	}
	if n := s.logsMetric(t, "halvings"); n != 0 {
		t.Errorf("%d halvings for refusals that are not too large", n)
	}
}
