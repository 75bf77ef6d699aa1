package e2e

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	gethrpc "github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/testproc"
)

// Real time through the binary: WebSocket subscriptions (eth_subscribe newHeads and logs) and
// HTTP filters (eth_newFilter, eth_getFilterChanges), driven by the clients people run (ethers,
// viem, go-ethereum) against anvil nodes whose every block the test mines itself: anvil runs
// with --no-mining and one genesis timestamp, and each block is the same signed transactions
// sent to every node and mined with the same explicit timestamp, so that two nodes are one
// chain (their block hashes are compared after each block).

const (
	// realtimeChainID is the chain of the real-time tests' anvil nodes, served as mainnet.
	realtimeChainID = 31337
	// realtimeGenesis is the genesis timestamp of their anvil nodes (--timestamp).
	realtimeGenesis = 1_700_000_000
	// blockSpacing is the timestamp step between two mined blocks, in seconds.
	blockSpacing = 12
)

// transferTopic is the topic of ERC-20's Transfer(address,address,uint256).
var transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// realtimeAnvil starts an anvil node that mines only when told (evm_mine), with the real-time
// tests' genesis timestamp.
func realtimeAnvil(t *testing.T) *anvil.Node {
	t.Helper()
	return anvil.Start(t, realtimeChainID, "--no-mining", "--timestamp", strconv.Itoa(realtimeGenesis))
}

// realtimeConfig serves the anvil nodes urls as mainnet (chain realtimeChainID, named
// "anvil"), with the embedded dev chain off; clients e2e and e2e-other, tokens e2e-token
// (principal e2e) and other-token (principal other); reads with a client id alone allowed,
// the way wallets with a URL connect. extra is appended (other top-level sections).
func realtimeConfig(extra string, urls ...string) string {
	return fmt.Sprintf(`
log: {level: info}
devchain: {enabled: false}
auth:
  allowReadsWithClientId: true
  clients: [{id: e2e}, {id: e2e-other}]
  tokens:
    - {sha256: %s, principal: e2e}
    - {sha256: %s, principal: other}
upstreams:
  mainnet: %d
  timeout: 2s
  pollInterval: 200ms
  cooldown: 2s
  chains:
    - chainId: %d
      name: anvil
      urls: [%s]
%s`, sha256Hex("e2e-token"), sha256Hex("other-token"), realtimeChainID, realtimeChainID, strings.Join(urls, ", "), extra)
}

// wsURL is the WebSocket URL of g's path (e.g. "/v1/web3/mainnet/e2e").
func wsURL(g *gateway, path string) string {
	return "ws://" + strings.TrimPrefix(g.API, "http://") + path
}

// ---------------------------------------------------------------------------------------
// The chain.

// chainDriver mines a chain on anvil nodes started by realtimeAnvil, block by block: it signs
// transactions with anvil's first dev key, sends each to every node, and mines each block on
// every node with the same timestamp, then checks that the nodes agree on the block's hash.
type chainDriver struct {
	t       *testing.T
	nodes   []*anvil.Node // the nodes still running
	key     *ecdsa.PrivateKey
	from    common.Address
	chainID *big.Int
	nonce   uint64 // of the next transaction
	time    uint64 // timestamp of the last mined block
	pending int    // transactions sent since the last mined block
}

// newChainDriver drives nodes, which must be at the same block.
func newChainDriver(t *testing.T, nodes ...*anvil.Node) *chainDriver {
	t.Helper()
	key, err := crypto.HexToECDSA(anvilKey0)
	if err != nil {
		t.Fatal(err)
	}
	d := &chainDriver{t: t, nodes: nodes, key: key, from: crypto.PubkeyToAddress(key.PublicKey),
		chainID: new(big.Int).SetUint64(nodes[0].ChainID)}
	d.resync()
	return d
}

// resync reads the next nonce and the latest block's timestamp from the first node (after an
// anvil_revert).
func (d *chainDriver) resync() {
	d.t.Helper()
	d.nonce = d.quantity("eth_getTransactionCount", d.from, "pending")
	d.time = d.latest(d.nodes[0]).Time
	d.pending = 0
}

// call is method(params...) on the first node; an error fails the test.
func (d *chainDriver) call(method string, params ...any) json.RawMessage {
	d.t.Helper()
	res, err := d.nodes[0].Call(method, params...)
	if err != nil {
		d.t.Fatalf("anvil %s: %v", method, err)
	}
	return res
}

// quantity is the hex quantity the first node answers to method(params...).
func (d *chainDriver) quantity(method string, params ...any) uint64 {
	d.t.Helper()
	var q hexutil.Uint64
	if err := json.Unmarshal(d.call(method, params...), &q); err != nil {
		d.t.Fatalf("anvil %s: %v", method, err)
	}
	return uint64(q)
}

// nodeBlock is what the tests read of a block.
type nodeBlock struct {
	Number       hexutil.Uint64 `json:"number"`
	Hash         common.Hash    `json:"hash"`
	ParentHash   common.Hash    `json:"parentHash"`
	Timestamp    hexutil.Uint64 `json:"timestamp"`
	Transactions []common.Hash  `json:"transactions"`
	Time         uint64         `json:"-"`
}

// block is the block tag (a number or "latest") as n has it.
func (d *chainDriver) block(n *anvil.Node, tag string) nodeBlock {
	d.t.Helper()
	raw, err := n.Call("eth_getBlockByNumber", tag, false)
	if err != nil {
		d.t.Fatalf("anvil eth_getBlockByNumber %s: %v", tag, err)
	}
	var b nodeBlock
	if err := json.Unmarshal(raw, &b); err != nil || b.Hash == (common.Hash{}) {
		d.t.Fatalf("anvil eth_getBlockByNumber %s: %s (%v)", tag, raw, err)
	}
	b.Time = uint64(b.Timestamp)
	return b
}

// latest is n's latest block.
func (d *chainDriver) latest(n *anvil.Node) nodeBlock {
	d.t.Helper()
	return d.block(n, "latest")
}

// send signs a transaction to to (nil: a creation) with data and gas and sends it to every
// node; it is mined by the next mine.
func (d *chainDriver) send(to *common.Address, data []byte, gas uint64) common.Hash {
	d.t.Helper()
	tx, err := types.SignNewTx(d.key, types.LatestSignerForChainID(d.chainID), &types.DynamicFeeTx{
		ChainID:   d.chainID,
		Nonce:     d.nonce,
		GasTipCap: big.NewInt(1e9),
		GasFeeCap: big.NewInt(100e9),
		Gas:       gas,
		To:        to,
		Data:      data,
	})
	if err != nil {
		d.t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		d.t.Fatal(err)
	}
	for _, n := range d.nodes {
		if _, err := n.Call("eth_sendRawTransaction", hexutil.Encode(raw)); err != nil {
			d.t.Fatalf("anvil %s eth_sendRawTransaction: %v", n.URL, err)
		}
	}
	d.nonce++
	d.pending++
	return tx.Hash()
}

// mine mines one block on every node, blockSpacing seconds after the last (plus skew
// seconds: two branches from one parent differ by it), and returns it once every node has it
// with the same hash and with every transaction sent since the last mine.
func (d *chainDriver) mine(skew uint64) nodeBlock {
	d.t.Helper()
	ts := d.time + blockSpacing + skew
	errs := make([]error, len(d.nodes))
	var wg sync.WaitGroup
	for i, n := range d.nodes {
		wg.Go(func() {
			_, errs[i] = n.Call("evm_mine", map[string]any{"timestamp": ts, "blocks": 1})
		})
	}
	wg.Wait()
	var first nodeBlock
	for i, n := range d.nodes {
		if errs[i] != nil {
			d.t.Fatalf("anvil %s evm_mine: %v", n.URL, errs[i])
		}
		b := d.latest(n)
		if i == 0 {
			first = b
			continue
		}
		if b.Hash != first.Hash || b.Number != first.Number {
			d.t.Fatalf("the nodes are no longer one chain: block %d %s on %s, %d %s on %s",
				first.Number, first.Hash, d.nodes[0].URL, b.Number, b.Hash, n.URL)
		}
	}
	if first.Time != ts || len(first.Transactions) != d.pending {
		d.t.Fatalf("mined block %d: timestamp %d with %d transactions, want %d with %d", first.Number, first.Time, len(first.Transactions), ts, d.pending)
	}
	d.time = ts
	d.pending = 0
	return first
}

// deploy deploys c with args in a block of its own and returns its address.
func (d *chainDriver) deploy(c *contracts.Contract, args ...any) common.Address {
	d.t.Helper()
	data, err := c.DeployData(args...)
	if err != nil {
		d.t.Fatal(err)
	}
	addr := crypto.CreateAddress(d.from, d.nonce)
	d.send(nil, data, 5_000_000)
	d.mine(0)
	var code hexutil.Bytes
	if err := json.Unmarshal(d.call("eth_getCode", addr, "latest"), &code); err != nil || len(code) == 0 {
		d.t.Fatalf("deploy %s: no code at %s (%v)", c.Name, addr, err)
	}
	return addr
}

// mint sends TestERC20.mint(to, amount) to token.
func (d *chainDriver) mint(token, to common.Address, amount int64) common.Hash {
	d.t.Helper()
	data, err := erc20.Calldata("mint", to, big.NewInt(amount))
	if err != nil {
		d.t.Fatal(err)
	}
	return d.send(&token, data, 200_000)
}

// drop kills n and drives the other nodes from now on.
func (d *chainDriver) drop(n *anvil.Node) {
	n.Kill()
	d.nodes = slices.DeleteFunc(d.nodes, func(m *anvil.Node) bool { return m == n })
}

// transfers is the Transfer logs of token in blocks from..to as the first node has them,
// in order.
func (d *chainDriver) transfers(token common.Address, from, to uint64) []seenLog {
	d.t.Helper()
	raw := d.call("eth_getLogs", map[string]any{
		"fromBlock": hexutil.EncodeUint64(from), "toBlock": hexutil.EncodeUint64(to),
		"address": token, "topics": []any{transferTopic},
	})
	var logs []types.Log
	if err := json.Unmarshal(raw, &logs); err != nil {
		d.t.Fatalf("anvil eth_getLogs: %v", err)
	}
	out := make([]seenLog, len(logs))
	for i, l := range logs {
		out[i] = seenLog{Block: l.BlockNumber, Tx: l.TxHash, Index: l.Index}
	}
	return out
}

// ---------------------------------------------------------------------------------------
// What a client saw.

// seenBlock is a head a client was given; Hash is zero when the client gives none (ethers).
type seenBlock struct {
	Number uint64
	Hash   common.Hash
}

// seenLog is a log a client was given.
type seenLog struct {
	Block   uint64
	Tx      common.Hash
	Index   uint
	Removed bool
}

func (l seenLog) String() string {
	r := ""
	if l.Removed {
		r = " removed"
	}
	return fmt.Sprintf("%d/%s/%d%s", l.Block, l.Tx.Hex()[:10], l.Index, r)
}

// seen is what a client was given, in order, and the errors it reported.
type seen struct {
	blocks []seenBlock
	logs   []seenLog
	errs   []string
}

func (s seen) clone() seen {
	return seen{blocks: slices.Clone(s.blocks), logs: slices.Clone(s.logs), errs: slices.Clone(s.errs)}
}

// watcher is one client following the chain.
type watcher interface {
	name() string
	// watchesBlocks tells whether it follows heads (else logs only).
	watchesBlocks() bool
	// headsInOrder tells whether the client hands heads on in the order they arrived: viem's
	// watchBlocks over a socket fetches each head's block (eth_getBlockByNumber) and calls
	// onBlock when that answer comes, so two heads in quick succession may swap.
	headsInOrder() bool
	ready() bool
	seen() seen
	// stop ends it and returns what it saw in all.
	stop(t *testing.T) seen
}

// scriptWatcher is a watcher run by one of the js/realtime-*.mjs scripts, whose stdout lines
// are parsed as they come (see the scripts' comments for their form).
type scriptWatcher struct {
	label     string
	blocks    bool
	unordered bool // heads may come out of order (viem ws)
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	stderr    *testproc.Buffer
	exited    chan struct{}

	mu      sync.Mutex
	s       seen
	isReady bool
	done    bool
	calls   string // the "calls" line's JSON
	lines   []string
}

// startScript runs node script with env added to this process's environment; blocks says
// whether the script follows heads.
func startScript(t *testing.T, label, script string, blocks bool, env ...string) *scriptWatcher {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required: install Node.js 20+ (.ci/run does)")
	}
	if _, err := os.Stat("node_modules/viem/package.json"); err != nil {
		t.Fatal("the JavaScript clients are not installed: run `npm ci --prefix e2e` (make test does)")
	}
	w := &scriptWatcher{label: label, blocks: blocks, stderr: &testproc.Buffer{}, exited: make(chan struct{})}
	w.cmd = exec.Command(node, script)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stderr = w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			w.parse(sc.Text())
		}
	}()
	go func() {
		<-read
		_ = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			w.mu.Lock()
			t.Logf("%s: stdout:\n%s\nstderr:\n%s", label, strings.Join(w.lines, "\n"), w.stderr.String())
			w.mu.Unlock()
		}
	})
	return w
}

// parse takes one line of the script's output.
func (w *scriptWatcher) parse(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	f := strings.Fields(line)
	bad := func() { w.s.errs = append(w.s.errs, "unexpected output: "+line) }
	switch {
	case len(f) == 0:
		bad()
	case f[0] == "ready":
		w.isReady = true
	case f[0] == "done":
		w.done = true
	case f[0] == "calls":
		w.calls = strings.TrimSpace(strings.TrimPrefix(line, "calls"))
	case f[0] == "error":
		w.s.errs = append(w.s.errs, line)
	case f[0] == "block" && len(f) == 3:
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			bad()
			return
		}
		b := seenBlock{Number: n}
		if f[2] != "-" {
			b.Hash = common.HexToHash(f[2])
		}
		w.s.blocks = append(w.s.blocks, b)
	case f[0] == "log" && len(f) == 5:
		n, err1 := strconv.ParseUint(f[1], 10, 64)
		i, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil || (f[4] != "true" && f[4] != "false") {
			bad()
			return
		}
		w.s.logs = append(w.s.logs, seenLog{Block: n, Tx: common.HexToHash(f[2]), Index: uint(i), Removed: f[4] == "true"})
	default:
		bad()
	}
}

func (w *scriptWatcher) name() string        { return w.label }
func (w *scriptWatcher) watchesBlocks() bool { return w.blocks }
func (w *scriptWatcher) headsInOrder() bool  { return !w.unordered }

func (w *scriptWatcher) ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.isReady
}

func (w *scriptWatcher) seen() seen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.clone()
}

// stop asks the script to stop and waits (10 s) for it to print done and exit.
func (w *scriptWatcher) stop(t *testing.T) seen {
	t.Helper()
	_, _ = io.WriteString(w.stdin, "stop\n")
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not stop within 10s of being asked", w.label)
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done || w.cmd.ProcessState.ExitCode() != 0 {
		w.s.errs = append(w.s.errs, fmt.Sprintf("the script ended without done (exit %d): %s", w.cmd.ProcessState.ExitCode(), strings.TrimSpace(w.stderr.String())))
	}
	return w.s.clone()
}

// callCounts is the script's "calls" report: calls and failed calls by method.
func (w *scriptWatcher) callCounts(t *testing.T) (calls, failed map[string]int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var r struct{ Calls, Failed map[string]int }
	if err := json.Unmarshal([]byte(w.calls), &r); err != nil {
		t.Fatalf("%s: calls report %q: %v", w.label, w.calls, err)
	}
	return r.Calls, r.Failed
}

// gethWatcher is go-ethereum's ethclient over a WebSocket: SubscribeNewHead and
// SubscribeFilterLogs. The hash of each head is computed from the header as given
// (types.Header.Hash), so a header missing a field is seen as a wrong hash.
type gethWatcher struct {
	label    string
	client   *ethclient.Client
	subs     []ethereum.Subscription
	quit     chan struct{}
	stopOnce sync.Once

	mu sync.Mutex
	s  seen
}

// watchGeth dials url with headers and subscribes to new heads (when heads) and to the
// Transfer logs of token (when token is not zero). It returns once the subscriptions are
// established.
func watchGeth(t *testing.T, label, url string, headers map[string]string, heads bool, token common.Address) *gethWatcher {
	t.Helper()
	var opts []gethrpc.ClientOption
	for k, v := range headers {
		opts = append(opts, gethrpc.WithHeader(k, v))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	rc, err := gethrpc.DialOptions(ctx, url, opts...)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", label, url, err)
	}
	w := &gethWatcher{label: label, client: ethclient.NewClient(rc), quit: make(chan struct{})}
	t.Cleanup(func() { w.stop(t); w.client.Close() })
	if heads {
		ch := make(chan *types.Header, 1024)
		sub, err := w.client.SubscribeNewHead(ctx, ch)
		if err != nil {
			t.Fatalf("%s: SubscribeNewHead: %s", label, describeErr(err))
		}
		follow(w, sub, ch, func(s *seen, h *types.Header) {
			s.blocks = append(s.blocks, seenBlock{Number: h.Number.Uint64(), Hash: h.Hash()})
		})
	}
	if token != (common.Address{}) {
		ch := make(chan types.Log, 1024)
		q := ethereum.FilterQuery{Addresses: []common.Address{token}, Topics: [][]common.Hash{{transferTopic}}}
		sub, err := w.client.SubscribeFilterLogs(ctx, q, ch)
		if err != nil {
			t.Fatalf("%s: SubscribeFilterLogs: %s", label, describeErr(err))
		}
		follow(w, sub, ch, func(s *seen, l types.Log) {
			s.logs = append(s.logs, seenLog{Block: l.BlockNumber, Tx: l.TxHash, Index: l.Index, Removed: l.Removed})
		})
	}
	return w
}

// follow records what sub delivers on ch with add, and the error that ends sub, until w
// stops.
func follow[T any](w *gethWatcher, sub ethereum.Subscription, ch <-chan T, add func(*seen, T)) {
	w.subs = append(w.subs, sub)
	go func() {
		for {
			select {
			case v := <-ch:
				w.mu.Lock()
				add(&w.s, v)
				w.mu.Unlock()
			case err := <-sub.Err():
				if err != nil {
					w.mu.Lock()
					w.s.errs = append(w.s.errs, "subscription ended: "+err.Error())
					w.mu.Unlock()
				}
				return
			case <-w.quit:
				return
			}
		}
	}()
}

func (w *gethWatcher) name() string        { return w.label }
func (w *gethWatcher) watchesBlocks() bool { return true }
func (w *gethWatcher) headsInOrder() bool  { return true }
func (w *gethWatcher) ready() bool         { return true }

func (w *gethWatcher) seen() seen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.clone()
}

func (w *gethWatcher) stop(*testing.T) seen {
	w.stopOnce.Do(func() {
		close(w.quit)
		for _, s := range w.subs {
			s.Unsubscribe()
		}
	})
	return w.seen()
}

// ---------------------------------------------------------------------------------------
// Checks.

// waitSeen waits (up to within) until every watcher has seen the block last (those that
// follow heads) and at least nLogs logs, or reported an error, then a little longer for
// anything delivered twice.
func waitSeen(t *testing.T, ws []watcher, last uint64, nLogs int, within time.Duration) {
	t.Helper()
	complete := func(w watcher) bool {
		s := w.seen()
		if len(s.errs) > 0 {
			return true
		}
		if w.watchesBlocks() && !slices.ContainsFunc(s.blocks, func(b seenBlock) bool { return b.Number == last }) {
			return false
		}
		return len(s.logs) >= nLogs
	}
	deadline := time.Now().Add(within)
	for slices.ContainsFunc(ws, func(w watcher) bool { return !complete(w) }) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything sent twice arrives within it
}

// waitWatchers waits (15 s) until every watcher is ready.
func waitWatchers(t *testing.T, ws []watcher) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var late []string
		for _, w := range ws {
			if !w.ready() {
				late = append(late, w.name())
			}
			if errs := w.seen().errs; len(errs) > 0 {
				t.Fatalf("%s: %s", w.name(), strings.Join(errs, "; "))
			}
		}
		if len(late) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not subscribed within 15s: %v", late)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkBlocks fails unless blocks are the blocks want, each exactly once, in order (any
// order unless inOrder); before them only base (the head when the client subscribed) may
// come, once. A block with a hash must have want's hash.
func checkBlocks(t *testing.T, name string, blocks []seenBlock, base uint64, want []nodeBlock, inOrder bool) {
	t.Helper()
	got := slices.Clone(blocks)
	if !inOrder {
		byNumber := func(a, b seenBlock) int { return cmp.Compare(a.Number, b.Number) }
		if !slices.IsSortedFunc(got, byNumber) {
			nums := make([]uint64, len(got))
			for i, b := range got {
				nums[i] = b.Number
			}
			t.Logf("%s: heads out of order (the client's doing): %v", name, nums)
		}
		slices.SortStableFunc(got, byNumber)
	}
	if len(got) > 0 && got[0].Number == base {
		t.Logf("%s: was given block %d, the head when it subscribed, first", name, base)
		got = got[1:]
	}
	nums := make([]uint64, len(got))
	for i, b := range got {
		nums[i] = b.Number
	}
	wantNums := make([]uint64, len(want))
	for i, b := range want {
		wantNums[i] = uint64(b.Number)
	}
	if !slices.Equal(nums, wantNums) {
		t.Errorf("%s: heads %s, want %d..%d once each in order (%s)", name, ranges(nums), wantNums[0], wantNums[len(wantNums)-1], blockProblems(nums, wantNums))
		return
	}
	for i, b := range got {
		if b.Hash != (common.Hash{}) && b.Hash != want[i].Hash {
			t.Errorf("%s: head %d has hash %s, the chain's is %s", name, b.Number, b.Hash, want[i].Hash)
		}
	}
}

// checkLogs fails unless logs are want, in order.
func checkLogs(t *testing.T, name string, logs, want []seenLog) {
	t.Helper()
	if !slices.Equal(logs, want) {
		t.Errorf("%s: logs\n  got  %v\n  want %v", name, logs, want)
	}
}

// blockProblems names the missing, repeated and out-of-order numbers of got against want.
func blockProblems(got, want []uint64) string {
	count := map[uint64]int{}
	for _, n := range got {
		count[n]++
	}
	var missing, twice, extra []uint64
	for _, n := range want {
		if count[n] == 0 {
			missing = append(missing, n)
		}
	}
	for n, c := range count {
		if c > 1 {
			twice = append(twice, n)
		}
		if !slices.Contains(want, n) {
			extra = append(extra, n)
		}
	}
	slices.Sort(twice)
	slices.Sort(extra)
	return fmt.Sprintf("missing %v, more than once %v, not expected %v, in order %v", missing, twice, extra, slices.IsSorted(got))
}

// ranges shows numbers compactly: runs of consecutive numbers as a..b.
func ranges(nums []uint64) string {
	var parts []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.FormatUint(nums[i], 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d..%d", nums[i], nums[j]))
		}
		i = j + 1
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ---------------------------------------------------------------------------------------
// Metrics.

// metricValues is the samples of the admin /metrics page named name, by their label set
// ("{a=\"b\"}", or "" for none).
func metricValues(t *testing.T, g *gateway, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range metric(t, g, name) {
		rest := strings.TrimPrefix(line, name)
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // another metric whose name starts with name
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[strings.TrimSpace(rest[:i])] = v
	}
	return out
}

// metricSum is the sum of name's samples whose label set contains every one of labels
// (e.g. `kind="newHeads"`).
func metricSum(t *testing.T, g *gateway, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for set, v := range metricValues(t, g, name) {
		if !slices.ContainsFunc(labels, func(l string) bool { return !strings.Contains(set, l) }) {
			sum += v
		}
	}
	return sum
}

// ---------------------------------------------------------------------------------------
// The clients.

// TestRealtimeClients runs the binary in front of two anvil nodes of one chain and follows a
// scripted chain with the real clients: ethers' WebSocketProvider (block events and a contract
// listener; the client id in the URL path), ethers' JsonRpcProvider (the same listeners: block
// numbers polled, the contract listener on eth_newFilter and eth_getFilterChanges, which
// web3gate answers itself), viem's webSocket transport (watchBlocks and
// watchContractEvent; client id in the /chains/{id}/{clientId} path), viem's http transport
// (watchContractEvent over eth_newFilter and eth_getFilterChanges, which web3gate answers
// itself; client id as ?apiKey=) and go-ethereum's ethclient over ws:// (SubscribeNewHead and
// SubscribeFilterLogs; X-API-Key and bearer token headers). Halfway through, the node that
// served more is killed. Every client must see every block and every Transfer event of the
// watched token exactly once, in order, and nothing of the other token.
func TestRealtimeClients(t *testing.T) {
	a0, a1 := realtimeAnvil(t), realtimeAnvil(t)
	d := newChainDriver(t, a0, a1)
	watched := d.deploy(erc20, "Watched", "WAT", uint8(18))
	other := d.deploy(erc20, "Other", "OTH", uint8(18))
	d.mint(watched, freshAddress(), 1) // an event before anyone watches
	base := d.mine(0)

	g := startGateway(t, realtimeConfig("", a0.URL, a1.URL))
	waitReady(t, g)

	tokenEnv := "WEB3GATE_TOKEN_ADDRESS=" + watched.Hex()
	chainEnv := fmt.Sprintf("WEB3GATE_CHAIN_ID=%d", realtimeChainID)
	viemWS := startScript(t, "viem ws", "js/realtime-viem.mjs", true, tokenEnv, chainEnv,
		"WEB3GATE_MODE=ws", "WEB3GATE_URL="+wsURL(g, fmt.Sprintf("/v1/web3/chains/%d/e2e", realtimeChainID)))
	viemWS.unordered = true
	viemHTTP := startScript(t, "viem http", "js/realtime-viem.mjs", false, tokenEnv, chainEnv,
		"WEB3GATE_MODE=http", "WEB3GATE_URL="+g.API+"/v1/web3/mainnet?apiKey=e2e")
	ethersHTTP := startScript(t, "ethers http", "js/realtime-ethers.mjs", true, tokenEnv, chainEnv,
		"WEB3GATE_MODE=http", "WEB3GATE_URL="+g.API+fmt.Sprintf("/v1/web3/chains/%d/e2e", realtimeChainID))
	ws := []watcher{
		startScript(t, "ethers ws", "js/realtime-ethers.mjs", true, tokenEnv, chainEnv,
			"WEB3GATE_MODE=ws", "WEB3GATE_URL="+wsURL(g, "/v1/web3/mainnet/e2e")),
		ethersHTTP,
		viemWS,
		viemHTTP,
		watchGeth(t, "go-ethereum ws", wsURL(g, "/v1/web3/mainnet"),
			map[string]string{"X-API-Key": "e2e", "Authorization": "Bearer e2e-token"}, true, watched),
	}
	waitWatchers(t, ws)

	// The script: 24 blocks, pairs of them mined back to back (a poll may see two at once),
	// with Transfers of both tokens; the busier node killed after the 12th.
	const n = 24
	var mined []nodeBlock
	for i := 1; i <= n; i++ {
		switch i % 4 {
		case 1:
			d.mint(watched, freshAddress(), int64(i))
			d.mint(watched, freshAddress(), int64(i))
		case 2:
			d.mint(other, freshAddress(), int64(i))
			d.mint(watched, freshAddress(), int64(i))
		case 0:
			d.mint(other, freshAddress(), int64(i))
		}
		mined = append(mined, d.mine(0))
		if i == n/2 {
			n0 := metricSum(t, g, "web3gate_upstream_requests_total", `node="anvil-0"`)
			n1 := metricSum(t, g, "web3gate_upstream_requests_total", `node="anvil-1"`)
			victim := a0
			if n1 > n0 {
				victim = a1
			}
			t.Logf("upstream requests before the kill: anvil-0 %v, anvil-1 %v; killing %s", n0, n1, victim.URL)
			d.drop(victim)
		}
		if i%3 != 0 {
			time.Sleep(150 * time.Millisecond)
		}
	}
	last := uint64(mined[len(mined)-1].Number)
	want := d.transfers(watched, uint64(base.Number)+1, last)
	waitSeen(t, ws, last, len(want), 30*time.Second)

	for _, w := range ws {
		s := w.stop(t)
		for _, e := range s.errs {
			t.Errorf("%s: %s", w.name(), e)
		}
		if w.watchesBlocks() {
			checkBlocks(t, w.name(), s.blocks, uint64(base.Number), mined, w.headsInOrder())
		}
		checkLogs(t, w.name(), s.logs, want)
		t.Logf("%s: %d heads, %d logs", w.name(), len(s.blocks), len(s.logs))
	}

	// The http clients' event listeners ran on web3gate's filters, never on eth_getLogs.
	for _, w := range []*scriptWatcher{viemHTTP, ethersHTTP} {
		calls, failed := w.callCounts(t)
		t.Logf("%s calls: %v, failed: %v", w.name(), calls, failed)
		if calls["eth_newFilter"] != 1 || calls["eth_getFilterChanges"] < 5 || calls["eth_getLogs"] != 0 || len(failed) != 0 {
			t.Errorf("%s: calls %v, failed %v; want one eth_newFilter, eth_getFilterChanges polls, no eth_getLogs, no failure", w.name(), calls, failed)
		}
	}
	t.Logf("feed: %v", metricValues(t, g, "web3gate_feed_upstream_calls_total"))
}

// TestRealtimeShippedConfig runs the binary as the README says (the shipped config.yaml, on
// the embedded dev chain, which mines a block per transaction) and follows it with
// go-ethereum's ethclient over ws:// with the dev credentials in headers: a TestERC20 deployed
// and minted to three times through web3gate (with a dev account's key) gives every block
// once, in order, with the hash the chain has, and the three Transfer logs.
func TestRealtimeShippedConfig(t *testing.T) {
	g := startGateway(t, shippedConfig(t, t.TempDir()))
	waitReady(t, g)
	c := dialGateway(t, g.API+"/v1/web3/mainnet", devCreds)
	ec := ethclient.NewClient(c)
	accts, err := devchain.DevAccounts(10)
	if err != nil {
		t.Fatal(err)
	}
	acct := accts[9]
	sess := &contracts.Session{Client: ec, Key: acct.Key, ChainID: big.NewInt(1337)}
	base := quantity(t, c, "eth_blockNumber")
	token := crypto.CreateAddress(acct.Address, pendingCount(t, c, acct.Address))

	w := watchGeth(t, "go-ethereum ws", wsURL(g, "/v1/web3/mainnet"),
		map[string]string{"X-API-Key": devCreds.clientID, "Authorization": "Bearer " + devCreds.token}, true, token)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if got, err := sess.Deploy(ctx, erc20, "Shipped", "SHP", uint8(18)); err != nil || got != token {
		t.Fatalf("deploy: %v at %s, want %s", err, got, token)
	}
	for i := range 3 {
		if _, err := sess.Transact(ctx, token, erc20, "mint", freshAddress(), big.NewInt(int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	last := quantity(t, c, "eth_blockNumber")
	var want []nodeBlock
	for n := base + 1; n <= last; n++ {
		var b nodeBlock
		if err := rpcCall(c, &b, "eth_getBlockByNumber", hexutil.EncodeUint64(n), false); err != nil {
			t.Fatalf("eth_getBlockByNumber %d: %s", n, describeErr(err))
		}
		want = append(want, b)
	}
	var logs []types.Log
	if err := rpcCall(c, &logs, "eth_getLogs", map[string]any{"fromBlock": hexutil.EncodeUint64(base + 1), "toBlock": hexutil.EncodeUint64(last), "address": token}); err != nil {
		t.Fatalf("eth_getLogs: %s", describeErr(err))
	}
	var wantLogs []seenLog
	for _, l := range logs {
		wantLogs = append(wantLogs, seenLog{Block: l.BlockNumber, Tx: l.TxHash, Index: l.Index})
	}
	if len(wantLogs) != 3 {
		t.Fatalf("the chain has %d Transfer logs of the token, want 3", len(wantLogs))
	}
	waitSeen(t, []watcher{w}, last, len(wantLogs), 20*time.Second)
	s := w.stop(t)
	for _, e := range s.errs {
		t.Errorf("%s", e)
	}
	checkBlocks(t, w.name(), s.blocks, base, want, true)
	checkLogs(t, w.name(), s.logs, wantLogs)
	t.Logf("blocks %d..%d: %d heads, %d logs", base+1, last, len(s.blocks), len(s.logs))
}
