package ratelimit

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

func newTestStage(t *testing.T, cfg Config, deps Deps) *Stage {
	t.Helper()
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCosts(t *testing.T) {
	head := uint64(0)
	s := newTestStage(t, Config{Costs: map[string]uint64{"eth_getBalance": 3}, GetLogsBlocksPerUnit: 100, SubscribeBytesPerUnit: 256},
		Deps{Head: func(uint64) uint64 { return head }})
	tests := []struct {
		name, method, params string
		head                 uint64
		want                 uint64
	}{
		{"free", "eth_chainId", ``, 0, 0},
		{"read", "eth_blockNumber", `[]`, 0, 1},
		{"forwarded, once free", "web3_sha3", `["0x00"]`, 0, 1},
		{"net_listening", "net_listening", `[]`, 0, 1},
		{"eth_syncing", "eth_syncing", `["junk"]`, 0, 1},
		{"unknown method", "foo_bar", `[]`, 0, 1},
		{"override", "eth_getBalance", `["0x0","latest"]`, 0, 3},
		{"call", "eth_call", `[{}]`, 0, 2},
		{"send", "eth_sendRawTransaction", `["0x00"]`, 0, 10},
		{"logs by hash", "eth_getLogs", `[{"blockHash":"0x01","fromBlock":"0x0","toBlock":"0xffffff"}]`, 0, 2},
		{"logs numbers", "eth_getLogs", `[{"fromBlock":"0x0","toBlock":"0x3e8"}]`, 0, 2 + 10},
		{"logs short range", "eth_getLogs", `[{"fromBlock":"0x10","toBlock":"0x20"}]`, 0, 2},
		{"logs reversed", "eth_getLogs", `[{"fromBlock":"0x20","toBlock":"0x10"}]`, 0, 2},
		{"logs at head", "eth_getLogs", `[{}]`, 0, 2},
		{"logs latest latest", "eth_getLogs", `[{"fromBlock":"latest","toBlock":"latest"}]`, 0, 2},
		{"logs open, head unknown", "eth_getLogs", `[{"fromBlock":"earliest"}]`, 0, 2 + openRangeUnits},
		{"logs open, head known", "eth_getLogs", `[{"fromBlock":"earliest"}]`, 5000, 2 + 50},
		{"logs from number to latest", "eth_getLogs", `[{"fromBlock":"0x3e8","toBlock":"latest"}]`, 2000, 2 + 10},
		{"logs garbage bound", "eth_getLogs", `[{"fromBlock":"soon"}]`, 2000, 2 + openRangeUnits},
		{"logs no params", "eth_getLogs", ``, 0, 2},
		{"logs over every block", "eth_getLogs", `[{"fromBlock":"0x0","toBlock":"0xffffffffffffffff"}]`, 0, 2 + (1<<64-1)/100},
		{"newHeads", "eth_subscribe", `["newHeads"]`, 0, 5},
		{"logs subscription, small filter", "eth_subscribe", `["logs",{"address":"0x0000000000000000000000000000000000000001"}]`, 0, 5},
		{"logs subscription, 64 KiB filter", "eth_subscribe", `["logs",{"topics":[["` + strings.Repeat("0", 65536) + `"]]}]`, 0, 5 + 65562/256},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			head = tc.head
			r := jsonrpc.Request{Method: tc.method, Params: []byte(tc.params)}
			if got := s.cost(s.costs, &r, 1); got != tc.want {
				t.Fatalf("cost %d, want %d", got, tc.want)
			}
		})
	}
}

func TestClientCosts(t *testing.T) {
	s := newTestStage(t, Config{Costs: map[string]uint64{"eth_call": 4}, Clients: []ClientConfig{
		{ClientID: "gold", Rate: Rate{Rate: 1, Burst: 1}, Costs: map[string]uint64{"eth_call": 1, "eth_chainId": 7}},
	}}, Deps{})
	call := jsonrpc.Request{Method: "eth_call"}
	chain := jsonrpc.Request{Method: "eth_chainId"}
	if got := s.cost(s.clients["gold"].costs, &call, 1); got != 1 {
		t.Errorf("gold eth_call %d", got)
	}
	if got := s.cost(s.clients["gold"].costs, &chain, 1); got != 7 {
		t.Errorf("gold eth_chainId %d", got)
	}
	if got := s.cost(s.defClient.costs, &call, 1); got != 4 {
		t.Errorf("others' eth_call %d", got)
	}
}

func TestAddCostSaturates(t *testing.T) {
	if got := addCost(1<<63, 1<<63); got != 1<<64-1 {
		t.Fatalf("%d", got)
	}
	if got := addCost(2, 3); got != 5 {
		t.Fatalf("%d", got)
	}
}
