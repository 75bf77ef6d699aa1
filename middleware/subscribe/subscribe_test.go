package subscribe

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// fakeSocket records the subscriptions the stage makes.
type fakeSocket struct {
	subs  map[string]*fakeSub
	limit int
	n     int
}

type fakeSub struct {
	id    string
	kind  string
	notes []string
	stop  func()
}

func (s *fakeSub) ID() string           { return s.id }
func (s *fakeSub) Notify(result []byte) { s.notes = append(s.notes, string(result)) }
func (s *fakeSub) NotifyAll(results [][]byte) {
	for _, r := range results {
		s.Notify(r)
	}
}
func (s *fakeSub) OnEnd(stop func()) { s.stop = stop }

func (f *fakeSocket) Subscribe(_ *proxy.Call, kind string) (proxy.Subscription, error) {
	if len(f.subs) >= f.limit {
		return nil, jsonrpc.ErrLimitExceeded.With("too many subscriptions")
	}
	f.n++
	s := &fakeSub{id: "0x" + strconv.Itoa(f.n), kind: kind}
	f.subs[s.id] = s
	return s, nil
}

func (f *fakeSocket) Unsubscribe(id string) bool {
	s, ok := f.subs[id]
	if ok {
		delete(f.subs, id)
		if s.stop != nil {
			s.stop()
		}
	}
	return ok
}

// stage is the stage over a feed set without chains: a feed is never found.
func stage(t *testing.T) *Stage {
	t.Helper()
	return stageWith(t, feeds.Bounds{})
}

// stageWith is stage with bounds on the logs criteria.
func stageWith(t *testing.T, bounds feeds.Bounds) *Stage {
	t.Helper()
	fs, err := feeds.New(feeds.Config{}, feeds.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Close)
	s, err := New(Config{Criteria: bounds}, Deps{Feeds: fs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var passed = proxy.HandlerFunc(func(*proxy.Call) (*proxy.Response, error) {
	return &proxy.Response{Result: []byte(`"next"`)}, nil
})

func serve(s *Stage, sock proxy.Socket, method, params string) (*proxy.Response, error) {
	c := &proxy.Call{Exchange: &proxy.Exchange{}, ChainID: 1, Request: jsonrpc.Request{ID: []byte("1"), Method: method}}
	if params != "" {
		c.Request.Params = []byte(params)
	}
	if sock != nil {
		c.Exchange.Socket = sock
	}
	return s.Serve(c, passed)
}

func TestSubscribeErrors(t *testing.T) {
	s := stage(t)
	for _, tc := range []struct {
		name, method, params string
		code                 int
		message              string
	}{
		{"no params", "eth_subscribe", "", -32602, "non-array args"},
		{"object params", "eth_subscribe", `{"a":1}`, -32602, "non-array args"},
		{"empty", "eth_subscribe", `[]`, -32602, "expected subscription name as first argument"},
		{"number kind", "eth_subscribe", `[1]`, -32602, "expected subscription name as first argument"},
		{"unknown kind", "eth_subscribe", `["blocks"]`, -32601, `no "blocks" subscription in eth namespace`},
		{"long unknown kind", "eth_subscribe", `["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]`, -32601,
			`no "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…" subscription in eth namespace`},
		{"newHeads with an argument", "eth_subscribe", `["newHeads",{}]`, -32602, "too many arguments, want at most 1"},
		{"logs with two arguments", "eth_subscribe", `["logs",{},{}]`, -32602, "too many arguments, want at most 2"},
		{"logs from latest to a block", "eth_subscribe", `["logs",{"toBlock":"0x1"}]`, -32602, "invalid block range params"},
		{"logs to a block before from", "eth_subscribe", `["logs",{"fromBlock":"0x5","toBlock":"0x1"}]`, -32602, "invalid block range params"},
		{"logs from safe", "eth_subscribe", `["logs",{"fromBlock":"safe"}]`, -32602, "invalid block range params"},
		{"logs to finalized", "eth_subscribe", `["logs",{"fromBlock":"0x1","toBlock":"finalized"}]`, -32602, "invalid block range params"},
		{"logs of a block hash", "eth_subscribe", `["logs",{"blockHash":"0x0000000000000000000000000000000000000000000000000000000000000001"}]`, -32602, "invalid block range params"},
		// Ranges geth accepts pass on to the feed (none here); the first is go-ethereum's
		// ethclient.SubscribeFilterLogs of a query without a range.
		{"logs as ethclient subscribes", "eth_subscribe", `["logs",{"fromBlock":"0x0","toBlock":"latest"}]`, -32601, "notifications are not offered on chain 1"},
		{"logs from earliest to a block", "eth_subscribe", `["logs",{"fromBlock":"earliest","toBlock":"0x9"}]`, -32601, "notifications are not offered on chain 1"},
		{"logs pending", "eth_subscribe", `["logs",{"fromBlock":"pending"}]`, -32602, "pending logs are not supported"},
		{"pending transactions", "eth_subscribe", `["newPendingTransactions"]`, -32601, errPendingNotOffered.Message},
		{"newHeads without a feed", "eth_subscribe", `["newHeads"]`, -32601, "notifications are not offered on chain 1"},
		{"unsubscribe without id", "eth_unsubscribe", `[]`, -32602, "missing value for required argument 0"},
		{"unsubscribe number", "eth_unsubscribe", `[1]`, -32602, "invalid argument 0: the subscription id must be a string"},
		{"unsubscribe two", "eth_unsubscribe", `["0x1","0x2"]`, -32602, "too many arguments, want at most 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := &fakeSocket{subs: map[string]*fakeSub{}, limit: 10}
			_, err := serve(s, sock, tc.method, tc.params)
			e, ok := err.(*jsonrpc.Error)
			if !ok || e.Code != tc.code || e.Message != tc.message {
				t.Fatalf("error %v, want %d %q", err, tc.code, tc.message)
			}
			if len(sock.subs) != 0 {
				t.Fatalf("a refused call subscribed: %v", sock.subs)
			}
		})
	}
}

// Over HTTP (no socket) both methods are geth's -32601; other methods pass on.
func TestOverHTTP(t *testing.T) {
	s := stage(t)
	for _, m := range []string{"eth_subscribe", "eth_unsubscribe"} {
		if _, err := serve(s, nil, m, `["newHeads"]`); err == nil || err.Error() != "notifications not supported" || err.(*jsonrpc.Error).Code != -32601 {
			t.Errorf("%s over HTTP: %v", m, err)
		}
	}
	if r, err := serve(s, nil, "eth_blockNumber", ""); err != nil || string(r.Result) != `"next"` {
		t.Fatalf("eth_blockNumber: %v %v", r, err)
	}
}

// syncing notifies false once; unsubscribe answers true for the socket's own id, then geth's
// -32000 "subscription not found".
func TestSyncingAndUnsubscribe(t *testing.T) {
	s := stage(t)
	sock := &fakeSocket{subs: map[string]*fakeSub{}, limit: 1}
	r, err := serve(s, sock, "eth_subscribe", `["syncing"]`)
	if err != nil || string(r.Result) != `"0x1"` {
		t.Fatalf("syncing: %v %v", r, err)
	}
	if sub := sock.subs["0x1"]; sub.kind != "syncing" || len(sub.notes) != 1 || sub.notes[0] != "false" {
		t.Fatalf("subscription %+v", sub)
	}
	// The socket's limit answers the next one.
	if _, err := serve(s, sock, "eth_subscribe", `["syncing"]`); err == nil || err.(*jsonrpc.Error).Code != -32005 {
		t.Fatalf("over the limit: %v", err)
	}
	if r, err := serve(s, sock, "eth_unsubscribe", `["0x1"]`); err != nil || string(r.Result) != "true" {
		t.Fatalf("eth_unsubscribe: %v %v, want true", r, err)
	}
	if _, err := serve(s, sock, "eth_unsubscribe", `["0x1"]`); err == nil || err.(*jsonrpc.Error).Code != -32000 || err.Error() != "subscription not found" {
		t.Fatalf("eth_unsubscribe again: %v, want -32000 subscription not found", err)
	}
}

// TestLogsRange: a logs subscription's fromBlock and toBlock read as geth reads them, and the
// sink delivers the logs of the blocks within them only (new and removed alike).
func TestLogsRange(t *testing.T) {
	for _, tc := range []struct {
		filter   string
		from, to uint64
	}{
		{`{}`, 0, math.MaxUint64},
		{`{"fromBlock":"latest","toBlock":"latest"}`, 0, math.MaxUint64},
		{`{"fromBlock":"0x0","toBlock":"latest"}`, 0, math.MaxUint64},
		{`{"fromBlock":"0x2"}`, 2, math.MaxUint64},
		{`{"fromBlock":"earliest","toBlock":"0x3"}`, 0, 3},
		{`{"fromBlock":"0x2","toBlock":"0x3"}`, 2, 3},
	} {
		_, span, err := logsCriteria([]json.RawMessage{json.RawMessage(tc.filter)}, feeds.Bounds{})
		if err != nil || span != (blockRange{tc.from, tc.to}) {
			t.Errorf("%s: range %+v, %v; want %d..%d", tc.filter, span, err, tc.from, tc.to)
		}
	}
	sub := &fakeSub{}
	crit := &feeds.Criteria{}
	sink := &logsSink{sub: sub, crit: crit, span: blockRange{2, 3}, key: criteriaKey(crit), memo: &logsMemo{}}
	for n := uint64(1); n <= 4; n++ {
		for _, removed := range []bool{false, true} {
			b := &feeds.Block{Number: n, HasLogs: true, Logs: []feeds.Log{{
				Raw: []byte(fmt.Sprintf(`{"n":%d}`, n)), RawRemoved: []byte(fmt.Sprintf(`{"n":%d,"removed":true}`, n)),
			}}}
			sink.Deliver(feeds.Event{Block: b, Removed: removed})
		}
	}
	want := []string{`{"n":2}`, `{"n":2,"removed":true}`, `{"n":3}`, `{"n":3,"removed":true}`}
	if !slices.Equal(sub.notes, want) {
		t.Fatalf("delivered %v, want %v", sub.notes, want)
	}
}

// A logs filter over a bound is refused -32602, naming the bound; one within them goes on
// (to the feed, which this stage has none of).
func TestSubscribeCriteriaBounds(t *testing.T) {
	s := stageWith(t, feeds.Bounds{Addresses: 2, TopicsPerPosition: 2, Product: 4, Bytes: 1024})
	addr := func(i int) string { return fmt.Sprintf(`"0x%040x"`, i) }
	hash := func(i int) string { return fmt.Sprintf(`"0x%064x"`, i) }
	for _, tc := range []struct {
		name, filter, message string
	}{
		{"addresses", `{"address":[` + addr(1) + `,` + addr(2) + `,` + addr(3) + `]}`,
			"filter too large: 3 addresses, the most this server takes is 2 (server.websocket.logsCriteria.maxAddresses)"},
		{"topics of a position", `{"topics":[null,[` + hash(1) + `,` + hash(2) + `,` + hash(3) + `]]}`,
			"filter too large: 3 topics at position 1, the most this server takes is 2 (server.websocket.logsCriteria.maxTopicsPerPosition)"},
		{"product", `{"address":[` + addr(1) + `,` + addr(2) + `],"topics":[[` + hash(1) + `,` + hash(2) + `],` + hash(3) + `]}`,
			"filter too large: 2 addresses × 3 topics is 6, the most this server takes is 4 (server.websocket.logsCriteria.maxProduct)"},
		{"bytes", `{"address":` + addr(1) + `,"topics":[` + hash(1) + `]` + strings.Repeat(" ", 1024) + `}`,
			"filter too large: 1160 bytes, the most this server holds for a subscription is 1024 (server.websocket.logsCriteria.maxBytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serve(s, &fakeSocket{subs: map[string]*fakeSub{}, limit: 10}, "eth_subscribe", `["logs",`+tc.filter+`]`)
			var e *jsonrpc.Error
			if !errors.As(err, &e) || e.Code != -32602 || e.Message != tc.message {
				t.Fatalf("got %v, want -32602 %q", err, tc.message)
			}
		})
	}
	within := `["logs",{"address":[` + addr(1) + `,` + addr(2) + `],"topics":[[` + hash(1) + `,` + hash(2) + `]]}]`
	_, err := serve(s, &fakeSocket{subs: map[string]*fakeSub{}, limit: 10}, "eth_subscribe", within)
	var e *jsonrpc.Error
	if !errors.As(err, &e) || e.Code != -32601 {
		t.Fatalf("a filter within the bounds: %v, want the feed's absence (-32601)", err)
	}
}
