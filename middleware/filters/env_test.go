package filters

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/devchain/devchaintest"
	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// node is a real chain the tests make blocks and logs on: the embedded dev chain or anvil.
type node struct {
	t        *testing.T
	chainID  uint64
	url      string       // http URL, or upstreams.EmbeddedURL with embedded
	embedded http.Handler // the dev chain's handler
	client   *ethclient.Client
	anvil    *anvil.Node // nil on the dev chain
	addrs    []common.Address
	sess     []*contracts.Session // of dev accounts 0-2, by index
}

// devNode starts an embedded dev chain, served to the tests' own client over loopback HTTP.
func devNode(t *testing.T) *node {
	t.Helper()
	chain := devchaintest.Start(t)
	n := &node{t: t, chainID: chain.ChainID(), url: upstreams.EmbeddedURL, embedded: chain.Handler()}
	n.use(chain.Client)
	return n
}

// anvilNode starts anvil, with the dev accounts funded there.
func anvilNode(t *testing.T) *node {
	t.Helper()
	a := anvil.Start(t, 31337)
	n := &node{t: t, chainID: a.ChainID, url: a.URL, anvil: a}
	n.dial(a.URL)
	for _, addr := range n.addrs {
		a.Fund(t, addr.Hex())
	}
	return n
}

// dial connects the tests' client to url (use).
func (n *node) dial(url string) {
	client, err := ethclient.Dial(url)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(client.Close)
	n.use(client)
}

// use makes client the tests' client, with sessions of dev accounts 0-2.
func (n *node) use(client *ethclient.Client) {
	t := n.t
	n.client = client
	accounts, err := devchain.DevAccounts(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accounts {
		n.addrs = append(n.addrs, a.Address)
		n.sess = append(n.sess, &contracts.Session{Client: client, Key: a.Key, ChainID: new(big.Int).SetUint64(n.chainID)})
	}
}

func (n *node) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	n.t.Cleanup(cancel)
	return ctx
}

// deploy deploys c (dev account 0) and returns its address.
func (n *node) deploy(c *contracts.Contract, args ...any) common.Address {
	n.t.Helper()
	addr, err := n.sess[0].Deploy(n.ctx(), c, args...)
	if err != nil {
		n.t.Fatalf("deploy %s: %v", c.Name, err)
	}
	return addr
}

// transact sends method of c at to (dev account 0) and returns its receipt.
func (n *node) transact(c *contracts.Contract, to common.Address, method string, args ...any) *types.Receipt {
	n.t.Helper()
	r, err := n.sess[0].Transact(n.ctx(), to, c, method, args...)
	if err != nil {
		n.t.Fatalf("%s.%s: %v", c.Name, method, err)
	}
	return r
}

// mine makes one block: a transfer of 1 wei from dev account 2 to itself on the dev chain,
// an empty block (anvil_mine) on anvil. It returns the new head.
func (n *node) mine() uint64 {
	n.t.Helper()
	ctx := n.ctx()
	if n.anvil != nil {
		if _, err := n.anvil.Call("anvil_mine"); err != nil {
			n.t.Fatalf("anvil_mine: %v", err)
		}
		return n.head()
	}
	s, from := n.sess[2], n.addrs[2]
	nonce, err := n.client.PendingNonceAt(ctx, from)
	if err != nil {
		n.t.Fatal(err)
	}
	tip := big.NewInt(1e9)
	h, err := n.client.HeaderByNumber(ctx, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	tx, err := types.SignNewTx(s.Key, types.LatestSignerForChainID(s.ChainID), &types.DynamicFeeTx{
		ChainID: s.ChainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Add(tip, new(big.Int).Mul(h.BaseFee, big.NewInt(2))),
		Gas: 21000, To: &from, Value: big.NewInt(1),
	})
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.client.SendTransaction(ctx, tx); err != nil {
		n.t.Fatal(err)
	}
	for {
		r, err := n.client.TransactionReceipt(ctx, tx.Hash())
		if err == nil {
			for n.head() < r.BlockNumber.Uint64() {
				time.Sleep(5 * time.Millisecond)
			}
			return r.BlockNumber.Uint64()
		}
		if ctx.Err() != nil {
			n.t.Fatalf("receipt of %s: %v", tx.Hash(), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (n *node) head() uint64 {
	n.t.Helper()
	h, err := n.client.BlockNumber(n.ctx())
	if err != nil {
		n.t.Fatal(err)
	}
	return h
}

// checkEveryBlockOnce checks that polls, the answers of a block filter's polls (in any
// order), report every block of the chain from one not after first up to the last one they
// report exactly once, each answer a run of consecutive blocks. (The dev chain may mine an
// empty block of its own after a transaction's: what the filter starts at is not known
// exactly.)
func (n *node) checkEveryBlockOnce(polls [][]string, first uint64) {
	n.t.Helper()
	end := n.head()
	pos := map[string]uint64{}
	for i, h := range n.hashes(1, end) {
		pos[h] = uint64(i) + 1
	}
	seen := map[uint64]int{}
	lo, hi := end+1, uint64(0)
	for _, hs := range polls {
		for i, h := range hs {
			p, ok := pos[h]
			if !ok {
				n.t.Fatalf("a poll reported %s, not a block of the chain", h)
			}
			if i > 0 && p != pos[hs[i-1]]+1 {
				n.t.Fatalf("a poll reported %v: not consecutive blocks", hs)
			}
			seen[p]++
			lo, hi = min(lo, p), max(hi, p)
		}
	}
	if lo > first {
		n.t.Fatalf("the polls reported blocks %d..%d, not block %d", lo, hi, first)
	}
	for b := lo; b <= hi; b++ {
		if seen[b] != 1 {
			n.t.Fatalf("block %d reported %d times over %d polls (blocks %d..%d)", b, seen[b], len(polls), lo, hi)
		}
	}
}

// hash is the hash of block i of the chain now.
func (n *node) hash(i uint64) string { return n.hashes(i, i)[0] }

// hashes are the hashes of blocks from..to of the chain now.
func (n *node) hashes(from, to uint64) []string {
	n.t.Helper()
	var out []string
	for i := from; i <= to; i++ {
		h, err := n.client.HeaderByNumber(n.ctx(), new(big.Int).SetUint64(i))
		if err != nil {
			n.t.Fatal(err)
		}
		out = append(out, h.Hash().Hex())
	}
	return out
}

// testStore is a fresh store of the backend: "sqlite" (a file) or "postgres".
func testStore(t *testing.T, backend string) *store.DB {
	t.Helper()
	cfg := store.Config{Path: filepath.Join(t.TempDir(), "web3gate.db")}
	if backend == store.DriverPostgres {
		cfg = store.Config{Driver: store.DriverPostgres, DSN: testengine.Postgres(t)}
	}
	return openStore(t, cfg)
}

func openStore(t *testing.T, cfg store.Config) *store.DB {
	t.Helper()
	cfg.SetDefaults()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// replica is what one web3gate process has: an upstream pool of the node, a feed, the stage
// over a store, and the stage chain filters → upstream pool.
type replica struct {
	t       *testing.T
	n       *node
	stage   *Stage
	handler proxy.Handler
	reg     *prometheus.Registry
	forward *countingHandler
}

// countingHandler is the terminal of a replica's chain: the upstream pool, counting the
// methods that reach it.
type countingHandler struct {
	next    proxy.Handler
	methods chan string
}

func (h *countingHandler) Serve(c *proxy.Call) (*proxy.Response, error) {
	select {
	case h.methods <- c.Method():
	default:
	}
	return h.next.Serve(c)
}

// newReplica builds a replica on n and db with cfg (zero fields: defaults).
func newReplica(t *testing.T, n *node, db *store.DB, cfg Config) *replica {
	t.Helper()
	return newChargedReplica(t, n, db, cfg, nil)
}

// newChargedReplica is newReplica whose stage charges ranges to ch (nil: none).
func newChargedReplica(t *testing.T, n *node, db *store.DB, cfg Config, ch Charger) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	uc := upstreams.Config{Mainnet: n.chainID, Chains: []upstreams.ChainConfig{{ChainID: n.chainID, Name: "test", URLs: []string{n.url}}}}
	deps := upstreams.Deps{Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	if n.embedded != nil {
		deps.Embedded = map[uint64]http.Handler{n.chainID: n.embedded}
	}
	ups, err := upstreams.New(uc, deps)
	if err != nil {
		t.Fatal(err)
	}
	ups.Start(ctx)
	t.Cleanup(ups.Close)
	pool, _ := ups.Pool(n.chainID)
	set, err := feeds.New(feeds.Config{PollInterval: 20 * time.Millisecond}, feeds.Deps{Chains: map[uint64]feeds.Chain{n.chainID: pool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	reg := prometheus.NewRegistry()
	stage, err := New(cfg, Deps{DB: db, Chains: map[uint64]string{n.chainID: "test"}, Registry: reg, Logger: zaptest.NewLogger(t), Charger: ch,
		Feed: func(id uint64) (Feed, bool) {
			f, ok := set.Feed(id)
			if !ok {
				return nil, false
			}
			return f, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	stage.Start()
	t.Cleanup(stage.Close)
	fwd := &countingHandler{next: ups, methods: make(chan string, 1000)}
	return &replica{t: t, n: n, stage: stage, handler: proxy.Compile(fwd, stage), reg: reg, forward: fwd}
}

// caller is who calls: a principal, or a client id alone.
type caller struct {
	principal, client string
	chain             uint64 // 0: the node's
}

var (
	alice = caller{principal: "alice", client: "app"}
	bob   = caller{principal: "bob", client: "app"}
	// app is the client id alone, without a bearer token.
	app = caller{client: "app"}
)

// call runs method(params...) through the replica's chain as who, and returns the result or
// the JSON-RPC error.
func (r *replica) call(who caller, method string, params ...any) (json.RawMessage, *jsonrpc.Error) {
	r.t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.callRaw(who, method, string(raw))
}

// callRaw is call with the params array as JSON text. Safe on any goroutine.
func (r *replica) callRaw(who caller, method, params string) (json.RawMessage, *jsonrpc.Error) {
	chain := who.chain
	if chain == 0 {
		chain = r.n.chainID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &proxy.Call{Ctx: ctx, Exchange: &proxy.Exchange{ClientID: who.client}, ChainID: chain,
		Request:   jsonrpc.Request{ID: []byte("1"), Method: method, Params: []byte(params)},
		Principal: &proxy.Principal{ID: who.principal, ClientID: who.client}}
	res, err := r.handler.Serve(c)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			// As the error writer answers it; the message keeps the cause for the test's
			// failure (callRaw is called from other goroutines too: no t.Fatal here).
			return nil, &jsonrpc.Error{Code: jsonrpc.ErrInternal.Code, Message: "internal error: " + err.Error()}
		}
		return nil, je
	}
	return res.Result, nil
}

// must is call that fails the test on an error.
func (r *replica) must(who caller, method string, params ...any) json.RawMessage {
	r.t.Helper()
	res, err := r.call(who, method, params...)
	if err != nil {
		r.t.Fatalf("%s: %d %s", method, err.Code, err.Message)
	}
	return res
}

// newFilter creates a filter (crit nil: a block filter) and returns its id.
func (r *replica) newFilter(who caller, crit any) string {
	r.t.Helper()
	var res json.RawMessage
	if crit == nil {
		res = r.must(who, "eth_newBlockFilter")
	} else {
		res = r.must(who, "eth_newFilter", crit)
	}
	var id string
	if err := json.Unmarshal(res, &id); err != nil || !jsonrpc.ValidID(id) {
		r.t.Fatalf("filter id %s: want \"0x\" and 32 hex digits", res)
	}
	return id
}

// blockChanges polls a block filter and returns the hashes.
func (r *replica) blockChanges(who caller, id string) []string {
	r.t.Helper()
	var hs []string
	if err := json.Unmarshal(r.must(who, "eth_getFilterChanges", id), &hs); err != nil {
		r.t.Fatal(err)
	}
	return hs
}

// blocksUntil polls a block filter until its answers, together, hold the block hash last
// (the feed reports a block once it has seen it, up to a poll interval after the node mined
// it), and returns them all.
func (r *replica) blocksUntil(who caller, id, last string) []string {
	r.t.Helper()
	var all []string
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(all, last) {
		if time.Now().After(deadline) {
			r.t.Fatalf("the block filter did not report %s within 10s; it reported %v", last, all)
		}
		all = append(all, r.blockChanges(who, id)...)
		time.Sleep(10 * time.Millisecond)
	}
	return all
}

// logsUntil polls a logs filter until it reported n logs in all, and returns them.
func (r *replica) logsUntil(who caller, id string, n int) []rpcLog {
	r.t.Helper()
	var all []rpcLog
	deadline := time.Now().Add(10 * time.Second)
	for len(all) < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("the logs filter did not report %d logs within 10s; it reported %+v", n, all)
		}
		all = append(all, r.logChanges(who, id)...)
		time.Sleep(10 * time.Millisecond)
	}
	return all
}

// rpcLog is a log as the node returns it.
type rpcLog struct {
	Address     common.Address `json:"address"`
	Topics      []common.Hash  `json:"topics"`
	Data        string         `json:"data"`
	BlockNumber string         `json:"blockNumber"`
	BlockHash   common.Hash    `json:"blockHash"`
	TxHash      common.Hash    `json:"transactionHash"`
	LogIndex    string         `json:"logIndex"`
	Removed     *bool          `json:"removed"`
}

// logChanges polls a logs filter and returns the logs.
func (r *replica) logChanges(who caller, id string) []rpcLog {
	r.t.Helper()
	var ls []rpcLog
	if err := json.Unmarshal(r.must(who, "eth_getFilterChanges", id), &ls); err != nil {
		r.t.Fatal(err)
	}
	for _, l := range ls {
		if l.Removed == nil {
			r.t.Fatalf("a log without \"removed\": %+v", l)
		}
	}
	return ls
}

// forwarded drains and returns the methods that reached the upstream pool.
func (r *replica) forwarded() []string {
	var out []string
	for {
		select {
		case m := <-r.forward.methods:
			out = append(out, m)
		default:
			return out
		}
	}
}

// wantError checks that err is code with a message starting with prefix.
func wantError(t *testing.T, what string, err *jsonrpc.Error, code int, prefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %d %q", what, code, prefix)
	}
	if err.Code != code || !strings.HasPrefix(err.Message, prefix) {
		t.Fatalf("%s: error %d %q, want %d %q…", what, err.Code, err.Message, code, prefix)
	}
}
