package feeds

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/devchain/devchaintest"
	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/upstreams"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// waitTimeout bounds every wait of the tests for the chain or the feed.
const waitTimeout = 20 * time.Second

// node is a chain the tests follow: an upstream pool over it, and a client for the tests'
// own transactions and reads.
type node struct {
	pool    *upstreams.Pool
	client  *ethclient.Client
	chainID uint64
	anvil   *anvil.Node // nil: the dev chain
}

// upstreamConfig is a pool over urls with test-sized intervals.
func upstreamConfig(chainID uint64, urls ...string) upstreams.Config {
	return upstreams.Config{Mainnet: chainID, PollInterval: 50 * time.Millisecond, Timeout: 2 * time.Second,
		Cooldown: time.Hour, Chains: []upstreams.ChainConfig{{ChainID: chainID, Name: "test", URLs: urls}}}
}

// startPool starts the pool of cfg.
func startPool(t *testing.T, cfg upstreams.Config, deps upstreams.Deps) *upstreams.Pool {
	t.Helper()
	ups, err := upstreams.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ups.Start(ctx)
	t.Cleanup(ups.Close)
	return ups.Mainnet()
}

// devNode starts an embedded dev chain (a block per transaction) and a pool over it.
func devNode(t *testing.T) *node {
	t.Helper()
	chain := devchaintest.Start(t)
	client := chain.Client
	pool := startPool(t, upstreamConfig(chain.ChainID(), upstreams.EmbeddedURL),
		upstreams.Deps{Embedded: map[uint64]http.Handler{chain.ChainID(): chain.Handler()}})
	return &node{pool: pool, client: client, chainID: chain.ChainID()}
}

// anvilNode starts an anvil node (automining) and a pool over it; the dev accounts are
// funded there.
func anvilNode(t *testing.T, extraArgs ...string) *node {
	t.Helper()
	n := anvil.Start(t, 31337, extraArgs...)
	client, err := ethclient.Dial(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	accounts, err := devchain.DevAccounts(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accounts {
		n.Fund(t, a.Address.Hex())
	}
	return &node{pool: startPool(t, upstreamConfig(31337, n.URL), upstreams.Deps{}), client: client, chainID: 31337, anvil: n}
}

// session sends transactions from dev account i.
func (n *node) session(t *testing.T, i int) *contracts.Session {
	t.Helper()
	accounts, err := devchain.DevAccounts(i + 1)
	if err != nil {
		t.Fatal(err)
	}
	return &contracts.Session{Client: n.client, Key: accounts[i].Key, ChainID: new(big.Int).SetUint64(n.chainID)}
}

var emitter = contracts.MustLoad("TransferEmitter")

// deployEmitter deploys a TransferEmitter (one block).
func deployEmitter(t *testing.T, s *contracts.Session) common.Address {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	addr, err := s.Deploy(ctx, emitter)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// emit mines a block with n Transfer logs for ids first … first+n-1 and returns its number.
func emit(t *testing.T, s *contracts.Session, at common.Address, first, n int64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := s.Transact(ctx, at, emitter, "mint721", big.NewInt(first), big.NewInt(n), big.NewInt(7))
	if err != nil {
		t.Fatal(err)
	}
	return r.BlockNumber.Uint64()
}

// call sends one JSON-RPC call to anvil.
func call(t *testing.T, n *anvil.Node, method string, params ...any) json.RawMessage {
	t.Helper()
	res, err := n.Call(method, params...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res
}

// mine mines k empty blocks on anvil.
func mine(t *testing.T, n *anvil.Node, k int) {
	t.Helper()
	call(t, n, "anvil_mine", fmt.Sprintf("0x%x", k))
}

// head is the node's head block number.
func (n *node) head(t *testing.T) uint64 {
	t.Helper()
	h, err := n.client.BlockNumber(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// counting is a Chain that counts the calls that reach the pool (by method; head polls
// apart) and can be made to fail every call, as a pool whose nodes are all down.
type counting struct {
	Chain
	mu    sync.Mutex
	calls map[string]int
	down  atomic.Bool
}

func newCounting(c Chain) *counting { return &counting{Chain: c, calls: map[string]int{}} }

var errDown = jsonrpc.ErrUpstreamUnavailable.With("no healthy upstream node")

func (c *counting) count(method string, params []byte) {
	if method == methodBlockByNumber && strings.Contains(string(params), `"latest"`) {
		method = "latest"
	}
	c.mu.Lock()
	c.calls[method]++
	c.mu.Unlock()
}

func (c *counting) Forward(ctx context.Context, method string, params []byte) ([]byte, error) {
	if c.down.Load() {
		return nil, errDown
	}
	c.count(method, params)
	return c.Chain.Forward(ctx, method, params)
}

func (c *counting) ForwardBatch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error) {
	if c.down.Load() {
		return nil, errDown
	}
	for _, cl := range calls {
		c.count(cl.Method, cl.Params)
	}
	return c.Chain.ForwardBatch(ctx, calls)
}

func (c *counting) Head() uint64 {
	if c.down.Load() {
		return 0
	}
	return c.Chain.Head()
}

// snapshot returns the counts so far.
func (c *counting) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// testFeed is a Set over one chain with test-sized intervals, and its logs and metrics.
type testFeed struct {
	*Feed
	set  *Set
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
}

func newFeed(t *testing.T, chain Chain, chainID uint64, mutate func(*Config)) *testFeed {
	t.Helper()
	return newPushedFeed(t, chain, chainID, mutate)
}

// newPushedFeed is newFeed whose chain has the node sockets (ws URLs) sockets.
func newPushedFeed(t *testing.T, chain Chain, chainID uint64, mutate func(*Config), sockets ...string) *testFeed {
	t.Helper()
	cfg := Config{PollInterval: 20 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
	}
	core, logs := observer.New(zap.DebugLevel)
	reg := prometheus.NewRegistry()
	set, err := New(cfg, Deps{Chains: map[uint64]Chain{chainID: chain}, Logger: zap.New(core), Registry: reg,
		Sockets: map[uint64][]string{chainID: sockets}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range logs.All() {
				t.Logf("feed log: %s %s %v", e.Level, e.Message, e.ContextMap())
			}
		}
	})
	f, ok := set.Feed(chainID)
	if !ok {
		t.Fatalf("no feed for chain %d", chainID)
	}
	return &testFeed{Feed: f, set: set, reg: reg, logs: logs}
}

// metric reads a gauge or counter of the feed, summed over its labels.
func (tf *testFeed) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := tf.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	return 0
}

// recorder is a Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Deliver(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// waitHead waits until r's last event is the block numbered n, not removed, and returns
// every event so far.
func (r *recorder) waitHead(t *testing.T, n uint64) []Event {
	t.Helper()
	var evs []Event
	wait.Within(t, waitTimeout, fmt.Sprintf("block %d delivered", n), func() bool {
		evs = r.all()
		return len(evs) > 0 && !evs[len(evs)-1].Removed && evs[len(evs)-1].Block.Number == n
	})
	return evs
}

// waitAtLeast waits until r's last event is a block numbered n or more, not removed, and
// returns every event so far. The dev chain may mine an empty block after a transaction's.
func (r *recorder) waitAtLeast(t *testing.T, n uint64) []Event {
	t.Helper()
	var evs []Event
	wait.Within(t, waitTimeout, fmt.Sprintf("block %d or later delivered", n), func() bool {
		evs = r.all()
		return len(evs) > 0 && !evs[len(evs)-1].Removed && evs[len(evs)-1].Block.Number >= n
	})
	return evs
}

// canonicalBlock reads the node's block number: its hash and its logs (eth_getLogs by hash).
func canonicalBlock(t *testing.T, n *node, number uint64) (hash common.Hash, logs []json.RawMessage) {
	t.Helper()
	ctx := context.Background()
	raw, err := n.pool.Forward(ctx, "eth_getBlockByNumber", []byte(fmt.Sprintf(`["0x%x",false]`, number)))
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Hash common.Hash `json:"hash"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	raw, err = n.pool.Forward(ctx, "eth_getLogs", []byte(`[{"blockHash":"`+b.Hash.Hex()+`"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &logs); err != nil {
		t.Fatal(err)
	}
	return b.Hash, logs
}

// checkAscending checks that events are blocks from..to, each once, in order, not removed,
// each the child of the one before.
func checkAscending(t *testing.T, evs []Event, from, to uint64) {
	t.Helper()
	if len(evs) != int(to-from+1) {
		t.Fatalf("%d events, want blocks %d to %d: %s", len(evs), from, to, describe(evs))
	}
	for i, ev := range evs {
		if ev.Removed || ev.Block.Number != from+uint64(i) {
			t.Fatalf("event %d is %s, want block %d: %s", i, describeOne(ev), from+uint64(i), describe(evs))
		}
		if i > 0 && ev.Block.ParentHash != evs[i-1].Block.Hash {
			t.Fatalf("block %d is not the child of the block before", ev.Block.Number)
		}
	}
}

func describeOne(ev Event) string {
	if ev.Removed {
		return fmt.Sprintf("-%d", ev.Block.Number)
	}
	return fmt.Sprintf("+%d", ev.Block.Number)
}

func describe(evs []Event) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = describeOne(ev)
	}
	return strings.Join(s, " ")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func bigInt(n int64) *big.Int { return big.NewInt(n) }

// sendRaw sends a transaction calling to with data from s's account without waiting for it
// to be mined (anvil with automine off); first: the first of a series, whose nonce is read
// from the node, the others taking the next ones.
func sendRaw(t *testing.T, ctx context.Context, s *contracts.Session, to common.Address, data []byte, first bool) {
	t.Helper()
	from := crypto.PubkeyToAddress(s.Key.PublicKey)
	if first {
		nonce, err := s.Client.NonceAt(ctx, from, nil)
		if err != nil {
			t.Fatal(err)
		}
		nextNonce[from] = nonce
	}
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: s.ChainID, Nonce: nextNonce[from], GasTipCap: big.NewInt(1e9),
		GasFeeCap: big.NewInt(100e9), Gas: 500_000, To: &to, Data: data})
	nextNonce[from]++
	signed, err := types.SignTx(tx, types.LatestSignerForChainID(s.ChainID), s.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Client.SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
}

// nextNonce is sendRaw's next nonce by account (tests using it do not run in parallel).
var nextNonce = map[common.Address]uint64{}
