package main

// The real-time measurement:
//
//	(w)  web3gate on its embedded dev chain (the shipped config.yaml, with the connection
//	     limits raised for one client of 11,000 sockets), serving 10,000 WebSocket
//	     subscribers of newHeads and 1,000 of a logs filter, each on its own socket, while
//	     blocks of 100 ERC-20 Transfer events are mined (one Multicall transaction of 100
//	     TestERC20.transfer calls per block: the dev chain seals a block per transaction).
//	(w0) one anvil node serving the same subscribers itself (eth_subscribe on its port), the
//	     same blocks: the reference, measured in the same rounds.
//
// Each round starts both servers afresh (anvil first in odd rounds, second in even ones),
// deploys the token and the multicall, reads the server's RSS, opens and subscribes every
// socket, waits for the RSS to settle and reads it again: (after − before) / sockets is the
// RSS per idle subscribed socket. Then it mines -ws-warmup blocks, unmeasured, and
// -ws-blocks measured ones, one at a time: a block is sent once the previous one reached
// every subscriber, after a pause of 200–450 ms (so that web3gate's feed finds blocks at
// every phase of its poll).
//
// Latency of a delivery. A subscriber has a block when its notification arrived (newHeads),
// or the last of its 100 logs (logs). "Arrived" is the kernel's receive time of the bytes on
// the client's socket (SO_TIMESTAMPNS; on loopback, when the server's write reached it): the
// 11,000 sockets are read by this one process on the same two cores, and the time it takes
// to get to each of them is its own cost, not the server's (that time is shown too, "as the
// client read it"). The start is when the server had the block:
//
//   - web3gate: when its feed saw the block (the feed's own record of it, scraped from the
//     server), so the figure is web3gate's delivery, without the wait for the feed's next poll
//     (feeds.pollInterval, 250 ms by default), which is shown apart ("from the send").
//   - anvil: when the transaction was sent: anvil mines it at once and notifies from the same
//     code, so its figure includes the mining of the block, a millisecond or two, which only
//     flatters the ratio in web3gate's favour.
//
// The spread (each delivery from the block's first delivery to any subscriber) needs no start
// time from the server, and is the same measure for both.
//
// Every notification is checked: its subscription id, the block number in order, 100 logs
// per block, none removed; every socket must get every block exactly once. web3gate's
// websocket metrics must show no dropped subscriber.

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/contracts"
	"github.com/web3gate/web3gate/devchain"
)

// The targets of (w).
const (
	targetWSP99    = 50 * time.Millisecond // delivery p99 over every subscriber
	targetWSPerSoc = 20 * 1024             // bytes of RSS per idle subscribed socket
)

const (
	wsLogsPerBlock = 100
	wsParallelDial = 32 // sockets being opened at once
	// wsDeliverLimit bounds the wait for a block to reach every subscriber.
	wsDeliverLimit = 30 * time.Second
	// anvilDevKey0 is the private key of anvil's first dev account (its published test
	// mnemonic), anvilDev0.
	anvilDevKey0 = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
	// wsDevAccount is the dev chain account that sends (w)'s transactions, by index.
	wsDevAccount = 9
)

// wsOptions are (w)'s flags.
type wsOptions struct {
	heads, logs     int // sockets of each kind
	blocks, warmups int
	noAnvil         bool // (w) alone, for quick iterations: no (w0) reference
}

func (o wsOptions) sockets() int { return o.heads + o.logs }

// wsSample is one server's figures in one round.
type wsSample struct {
	connect   time.Duration // opening and subscribing every socket
	rssBefore int64         // bytes, before the sockets
	rssAfter  int64         // bytes, with every socket idle and subscribed
	// heap, stack and goroutines added per socket, from web3gate's Go metrics (web3gate only).
	heapPer, stackPer, goroutinesPer float64
	hasGo                            bool
	// The latencies of every delivery of the measured blocks, ns, sorted: from the start (the
	// feed's sight of the block, or the send), newHeads and logs apart, from the send, from
	// the block's first delivery, and as this process read them.
	all, heads, logs, fromSend, spread, seen []int64
	cpuPerBlock                              time.Duration // the server's CPU time per measured block
	// irqPerBlock is the machine's interrupt time (irq and softirq) per measured block: mostly
	// the TCP receive path of the notifications, which loopback runs as the server writes
	// them, but which the kernel counts apart from the processes.
	irqPerBlock time.Duration
	// CPUs used on average from the measured blocks' sends to their last deliveries: by the
	// server, and by processes other than the server and this one.
	serverCores, otherCores float64
	problems                []string
}

func (s wsSample) rssPerSocket(n int) float64 { return float64(s.rssAfter-s.rssBefore) / float64(n) }

// wsRun is the whole measurement.
type wsRun struct {
	opts   wsOptions
	rounds []map[string]*wsSample // "w" and "w0"
}

// wsServer is one server under (w): how to reach it and what it runs as.
type wsServer struct {
	key, name     string
	proc          *child
	httpURL       string
	wsURL         string
	admin         string // web3gate's admin listener; "" for anvil
	header        http.Header
	key0          *ecdsa.PrivateKey // the sending account
	sightFromFeed bool              // the start of a delivery is the feed's sight of the block
}

// measureWS runs (w) and (w0) for every round.
func measureWS(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string, o wsOptions) (*wsRun, error) {
	if err := raiseFileLimit(o.sockets() + 1000); err != nil {
		return nil, err
	}
	if len(cfg.loadCPUs) > 0 {
		cpu, err := strconv.Atoi(cfg.loadCPUs)
		if err != nil {
			return nil, fmt.Errorf("load CPUs %q: %w", cfg.loadCPUs, err)
		}
		restore, err := pinSelf([]int{cpu})
		if err != nil {
			return nil, err
		}
		defer restore()
	}
	dir, err := os.MkdirTemp(env.tmp, "ws-")
	if err != nil {
		return nil, err
	}
	run := &wsRun{opts: o}
	fmt.Printf("ws: %d newHeads and %d logs subscribers, blocks of %d Transfer events; %d warm-up and %d measured blocks a round\n",
		o.heads, o.logs, wsLogsPerBlock, o.warmups, o.blocks)
	for r := range cfg.rounds {
		rd := map[string]*wsSample{}
		for _, k := range wsOrder(r) {
			if k == "w0" && o.noAnvil {
				continue
			}
			roundDir := filepath.Join(dir, fmt.Sprintf("round%d-%s", r+1, k))
			if err := os.Mkdir(roundDir, 0o700); err != nil {
				return run, err
			}
			s, err := wsRound(ctx, cs, cfg, env, anvilBin, roundDir, k, o)
			if err != nil {
				return run, fmt.Errorf("round %d, (%s): %w", r+1, k, err)
			}
			rd[k] = s
			wsProgress(r, cfg, k, s, o)
		}
		run.rounds = append(run.rounds, rd)
	}
	return run, nil
}

// wsOrder is the order of the servers in round r: anvil first in odd rounds (counted from 1).
func wsOrder(r int) []string {
	if r%2 == 0 {
		return []string{"w0", "w"}
	}
	return []string{"w", "w0"}
}

// wsRound measures one server: k "w" (web3gate) or "w0" (anvil).
func wsRound(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin, dir, k string, o wsOptions) (*wsSample, error) {
	srv, err := startWSServer(ctx, cs, cfg, env, anvilBin, dir, k, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cs.stop(srv.proc) }()
	s := &wsSample{}

	// The chain: a token, the multicall holding tokens, and the block transaction.
	rc, err := rpc.DialOptions(ctx, srv.httpURL, rpc.WithHeaders(srv.header))
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	client := ethclient.NewClient(rc)
	send, err := newBlockSender(ctx, client, srv.key0)
	if err != nil {
		return nil, err
	}
	filter := fmt.Sprintf(`{"address":"%s","topics":["%s"]}`, strings.ToLower(send.token.Hex()), contracts.MustLoad("TestERC20").ABI.Events["Transfer"].ID.Hex())

	pid := srv.proc.cmd.Process.Pid
	goBefore, err := srv.goMetrics()
	if err != nil {
		return nil, err
	}
	if s.rssBefore, err = settledRSS(ctx, pid); err != nil {
		return nil, err
	}
	wc := newWSClient(srv.wsURL, srv.header, wsLogsPerBlock)
	defer wc.close()
	started := time.Now()
	if err := wc.subscribeAll(ctx, o.heads, o.logs, wsParallelDial, filter); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", srv.name, err, indent(srv.proc.out.String()))
	}
	s.connect = time.Since(started)
	if s.rssAfter, err = settledRSS(ctx, pid); err != nil {
		return nil, err
	}
	goAfter, err := srv.goMetrics()
	if err != nil {
		return nil, err
	}
	if goBefore != nil {
		n := float64(o.sockets())
		s.hasGo = true
		s.heapPer = (goAfter["go_memstats_heap_inuse_bytes"] - goBefore["go_memstats_heap_inuse_bytes"]) / n
		s.stackPer = (goAfter["go_memstats_stack_inuse_bytes"] - goBefore["go_memstats_stack_inuse_bytes"]) / n
		s.goroutinesPer = (goAfter["go_goroutines"] - goBefore["go_goroutines"]) / n
	}

	// The blocks.
	var sent []int64
	var hashes []common.Hash
	var sights []feedSighting
	// From each measured block's send to its last delivery: the time, and the CPU time of the
	// server, of this process, of interrupts and of the whole machine.
	var wall, cpu, self, irq, busy time.Duration
	for b := range o.warmups + o.blocks {
		// A pause: the feed's poll is at another phase for every block.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200*time.Millisecond + rand.N(250*time.Millisecond)):
		}
		cpu0, self0, irq0, ct0, err := wsSnapshot(pid)
		if err != nil {
			return nil, err
		}
		h, at, err := send.send(ctx)
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", b+1, err)
		}
		hashes, sent = append(hashes, h), append(sent, at)
		want := int64((b + 1) * o.sockets())
		got, err := wc.waitDone(ctx, want, wsDeliverLimit)
		if err != nil {
			return nil, err
		}
		cpu1, self1, irq1, ct1, err := wsSnapshot(pid)
		if err != nil {
			return nil, err
		}
		if b >= o.warmups {
			wall += time.Duration(time.Now().UnixNano() - at)
			cpu += cpu1 - cpu0
			self += self1 - self0
			irq += irq1 - irq0
			busy += ct1["cpu"].busy - ct0["cpu"].busy
		}
		if srv.sightFromFeed {
			// Between blocks: the feed has seen this one and no other since.
			fs, err := feedSight(srv.admin)
			if err != nil {
				return nil, err
			}
			sights = append(sights, fs)
		}
		if got < want {
			s.problems = append(s.problems, fmt.Sprintf("block %d of the round: %d of %d deliveries within %v",
				b+1, got-int64(b*o.sockets()), o.sockets(), wsDeliverLimit))
			break
		}
	}
	if len(hashes) > o.warmups {
		s.cpuPerBlock = cpu / time.Duration(len(hashes)-o.warmups)
		s.irqPerBlock = irq / time.Duration(len(hashes)-o.warmups)
		s.serverCores = cpu.Seconds() / wall.Seconds()
		s.otherCores = max(busy-cpu-self-irq, 0).Seconds() / wall.Seconds()
	}

	// What was mined: one block per transaction, 100 Transfer events each.
	numbers := make([]uint64, len(hashes))
	for i, h := range hashes {
		r, err := client.TransactionReceipt(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("receipt of block transaction %d: %w", i+1, err)
		}
		if r.Status != types.ReceiptStatusSuccessful || len(r.Logs) != wsLogsPerBlock {
			return nil, fmt.Errorf("block transaction %d: status %d, %d logs, want 1 and %d", i+1, r.Status, len(r.Logs), wsLogsPerBlock)
		}
		numbers[i] = r.BlockNumber.Uint64()
		if i > 0 && numbers[i] <= numbers[i-1] {
			return nil, fmt.Errorf("block transactions %d and %d mined in blocks %d and %d", i, i+1, numbers[i-1], numbers[i])
		}
	}
	var starts []int64
	if srv.sightFromFeed {
		if starts, err = sightTimes(sights, numbers); err != nil {
			return nil, err
		}
	} else {
		starts = sent
	}
	if srv.admin != "" {
		if bad, err := wsDropped(srv.admin); err != nil {
			return nil, err
		} else if bad != "" {
			s.problems = append(s.problems, bad)
		}
	}
	wc.close()
	s.problems = append(s.problems, collectDeliveries(s, wc.subs, numbers, starts, sent, o.warmups)...)
	return s, nil
}

// collectDeliveries fills s's latencies from what the subscribers received, and returns
// what was wrong: a block missing or twice, a block not mined by the bench, bad notifications.
// numbers are the blocks mined, starts and sent their start times and send times; the first
// warmups blocks are not measured.
func collectDeliveries(s *wsSample, subs []*subscriber, numbers []uint64, starts, sent []int64, warmups int) []string {
	index := make(map[uint64]int, len(numbers))
	for i, n := range numbers {
		index[n] = i
	}
	// The block's first delivery to any subscriber.
	first := make([]int64, len(numbers))
	for _, sub := range subs {
		for _, d := range sub.got {
			if i, ok := index[d.block]; ok && (first[i] == 0 || d.first < first[i]) {
				first[i] = d.first
			}
		}
	}
	var problems []string
	var missing, twice, stray, bad, ended, noStamp int
	var firstBad, firstEnd string
	for _, sub := range subs {
		seen := make([]int, len(numbers))
		for _, d := range sub.got {
			i, ok := index[d.block]
			if !ok {
				stray++
				continue
			}
			seen[i]++
			if seen[i] > 1 || i < warmups {
				continue
			}
			if d.last == 0 {
				noStamp++
				continue
			}
			lat := d.last - starts[i]
			s.all = append(s.all, lat)
			if sub.logs {
				s.logs = append(s.logs, lat)
			} else {
				s.heads = append(s.heads, lat)
			}
			s.fromSend = append(s.fromSend, d.last-sent[i])
			s.spread = append(s.spread, d.last-first[i])
			s.seen = append(s.seen, d.seen-starts[i])
		}
		for _, c := range seen {
			switch {
			case c == 0:
				missing++
			case c > 1:
				twice++
			}
		}
		if sub.bad > 0 {
			if bad == 0 {
				firstBad = sub.badMsg
			}
			bad += sub.bad
		}
		if sub.err != nil {
			if ended == 0 {
				firstEnd = sub.err.Error()
			}
			ended++
		}
	}
	for _, c := range []struct {
		n    int
		what string
	}{{missing, "block deliveries missing"}, {twice, "blocks delivered twice to a socket"},
		{stray, "deliveries of blocks the bench did not mine"}, {noStamp, "deliveries without a kernel receive time"},
		{bad, "bad notifications (first: " + firstBad + ")"}, {ended, "sockets closed by the server (first: " + firstEnd + ")"}} {
		if c.n > 0 {
			problems = append(problems, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	for _, xs := range [][]int64{s.all, s.heads, s.logs, s.fromSend, s.spread, s.seen} {
		slices.Sort(xs)
	}
	return problems
}

// quantile is the q-quantile of sorted (nearest rank), 0 for none.
func quantile(sorted []int64, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999999) - 1
	return time.Duration(sorted[min(max(i, 0), len(sorted)-1)])
}

// wsSnapshot reads the CPU time of the server, of this process, of interrupts and of the
// machine.
func wsSnapshot(pid int) (server, self, irq time.Duration, ct cpuTimes, err error) {
	if server, err = cpuTime(pid); err != nil {
		return 0, 0, 0, nil, err
	}
	if self, err = cpuTime(os.Getpid()); err != nil {
		return 0, 0, 0, nil, err
	}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, nil, err
	}
	if irq, err = parseIRQTime(raw); err != nil {
		return 0, 0, 0, nil, err
	}
	ct, err = readCPUTimes()
	return server, self, irq, ct, err
}

// parseIRQTime is the machine's irq + softirq time from /proc/stat: the sixth and seventh
// numbers of the "cpu" line (user nice system idle iowait irq softirq ...), in clock ticks.
func parseIRQTime(stat []byte) (time.Duration, error) {
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var ticks int64
	for _, v := range f[6:8] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}

// startWSServer starts the server of k with its sending account, on the servers' CPUs.
func startWSServer(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin, dir, k string, o wsOptions) (*wsServer, error) {
	if k == "w0" {
		t := &target{key: "w0", headers: [][2]string{{"Content-Type", "application/json"}}}
		if err := startAnvil(ctx, cs, cfg.serverCPUs, anvilBin, t); err != nil {
			return nil, err
		}
		key, err := crypto.HexToECDSA(anvilDevKey0)
		if err != nil {
			return nil, err
		}
		return &wsServer{key: k, name: "anvil", proc: t.servers[0], httpURL: t.url,
			wsURL: "ws" + strings.TrimPrefix(t.url, "http"), header: http.Header{}, key0: key}, nil
	}
	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (ws)", wsConfig(env.root, dir, o.sockets()))
	if err != nil {
		return nil, err
	}
	accounts, err := devchain.DevAccounts(wsDevAccount + 1)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	for _, h := range devHeaders {
		header.Set(h[0], h[1])
	}
	header.Del("Content-Type")
	return &wsServer{key: k, name: "web3gate", proc: c, httpURL: api + "/v1/web3/mainnet",
		wsURL: "ws" + strings.TrimPrefix(api, "http") + "/v1/web3/mainnet", admin: admin, header: header,
		key0: accounts[wsDevAccount].Key, sightFromFeed: true}, nil
}

// wsConfig is the shipped config.yaml on a fresh store in dir, its connection limits raised
// for one client holding sockets WebSockets from one address.
func wsConfig(root, dir string, sockets int) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		raw, err := os.ReadFile(filepath.Join(root, "config.yaml"))
		if err != nil {
			return "", err
		}
		out, err := wsConfigBytes(raw, api, admin, dir, sockets)
		if err != nil {
			return "", fmt.Errorf("config.yaml: %w", err)
		}
		path := filepath.Join(dir, "web3gate.yaml")
		return path, os.WriteFile(path, out, 0o600)
	}
}

func wsConfigBytes(raw []byte, api, admin int, dir string, sockets int) ([]byte, error) {
	out, err := signConfigBytes(raw, api, admin, dir, nil)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, err
	}
	limit := strconv.Itoa(sockets + 100) // and the bench's HTTP connections
	for _, key := range []string{"server.maxConns", "server.maxConnsPerIP", "server.websocket.maxConnsPerClient"} {
		if err := setYAML(&doc, key, limit); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(&doc)
}

// goMetrics reads the Go runtime's series of web3gate's /metrics; nil for anvil.
func (srv *wsServer) goMetrics() (map[string]float64, error) {
	if srv.admin == "" {
		return nil, nil
	}
	return metricsWithPrefix(srv.admin, "go_")
}

// wsDropped says which subscribers web3gate dropped, from its metrics; "" none.
func wsDropped(admin string) (string, error) {
	m, err := metricsWithPrefix(admin, "web3gate_websocket_dropped_total")
	if err != nil {
		return "", err
	}
	var parts []string
	for k, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "", nil
	}
	return "web3gate dropped subscribers: " + strings.Join(parts, ", "), nil
}

// feedSighting is the head web3gate's feed has seen and when it first saw it.
type feedSighting struct {
	block uint64
	at    int64 // Unix ns
}

// feedSight reads web3gate's feed head and when the feed first saw it
// (web3gate_feed_head_block, web3gate_feed_head_seen_timestamp_seconds) of its one chain.
func feedSight(admin string) (feedSighting, error) {
	m, err := metricsWithPrefix(admin, "web3gate_feed_head_")
	if err != nil {
		return feedSighting{}, err
	}
	return parseFeedSight(m)
}

func parseFeedSight(m map[string]float64) (feedSighting, error) {
	var fs feedSighting
	var heads, seens int
	for k, v := range m {
		name, _, _ := strings.Cut(k, "{")
		switch name {
		case "web3gate_feed_head_block":
			heads++
			fs.block = uint64(v)
		case "web3gate_feed_head_seen_timestamp_seconds":
			seens++
			fs.at = int64(math.Round(v * 1e9))
		}
	}
	if heads != 1 || seens != 1 || fs.at <= 0 {
		return fs, fmt.Errorf("web3gate's /metrics: %d web3gate_feed_head_block and %d web3gate_feed_head_seen_timestamp_seconds series (%v), want one chain's", heads, seens, m)
	}
	return fs, nil
}

// sightTimes matches the feed's sightings, one read after each block was delivered, with the
// blocks mined: each must be of its block.
func sightTimes(sights []feedSighting, numbers []uint64) ([]int64, error) {
	if len(sights) != len(numbers) {
		return nil, fmt.Errorf("%d sightings of the feed for %d blocks", len(sights), len(numbers))
	}
	at := make([]int64, len(numbers))
	for i, fs := range sights {
		if fs.block != numbers[i] {
			return nil, fmt.Errorf("after block %d was delivered, web3gate's feed head was block %d", numbers[i], fs.block)
		}
		at[i] = fs.at
	}
	return at, nil
}

// blockSender sends (w)'s block transactions from one account: each a Multicall of 100
// TestERC20.transfer calls, of one token unit to each of 100 fixed addresses.
type blockSender struct {
	client *ethclient.Client
	key    *ecdsa.PrivateKey
	signer types.Signer
	chain  *big.Int
	nonce  uint64
	gas    uint64
	token  common.Address
	multi  common.Address
	data   []byte
}

// newBlockSender deploys the token and the multicall, mints tokens to the multicall and
// prepares the block transaction.
func newBlockSender(ctx context.Context, client *ethclient.Client, key *ecdsa.PrivateKey) (*blockSender, error) {
	chain, err := client.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	erc20, mc := contracts.MustLoad("TestERC20"), contracts.MustLoad("Multicall")
	sess := &contracts.Session{Client: client, Key: key, ChainID: chain}
	bs := &blockSender{client: client, key: key, signer: types.LatestSignerForChainID(chain), chain: chain}
	if bs.token, err = sess.Deploy(ctx, erc20, "Bench Token", "BENCH", uint8(18)); err != nil {
		return nil, err
	}
	if bs.multi, err = sess.Deploy(ctx, mc); err != nil {
		return nil, err
	}
	if _, err := sess.Transact(ctx, bs.token, erc20, "mint", bs.multi, big.NewInt(1e15)); err != nil {
		return nil, err
	}
	calls := make([][]byte, wsLogsPerBlock)
	for i := range calls {
		if calls[i], err = erc20.Calldata("transfer", common.BigToAddress(big.NewInt(int64(0x3000+i))), big.NewInt(1)); err != nil {
			return nil, err
		}
	}
	if bs.data, err = mc.Calldata("aggregate", bs.token, calls); err != nil {
		return nil, err
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	// The first block writes 100 new balances, the most gas any will take.
	gas, err := client.EstimateGas(ctx, ethereumCall(from, bs.multi, bs.data))
	if err != nil {
		return nil, fmt.Errorf("estimate the block transaction's gas: %w", err)
	}
	bs.gas = gas + gas/5
	if bs.nonce, err = client.PendingNonceAt(ctx, from); err != nil {
		return nil, err
	}
	return bs, nil
}

// send signs and sends the next block transaction; at is the time (Unix ns) just before
// it was written to the server.
func (bs *blockSender) send(ctx context.Context) (common.Hash, int64, error) {
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{ChainID: bs.chain, Nonce: bs.nonce,
		GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(10e9), Gas: bs.gas, To: &bs.multi, Data: bs.data}), bs.signer, bs.key)
	if err != nil {
		return common.Hash{}, 0, err
	}
	at := time.Now().UnixNano()
	if err := bs.client.SendTransaction(ctx, tx); err != nil {
		return common.Hash{}, 0, fmt.Errorf("send the block transaction: %w", err)
	}
	bs.nonce++
	return tx.Hash(), at, nil
}

// settledRSS reads pid's RSS every 250 ms until two readings a second apart differ by less
// than 1 MiB, or 15 s pass (then the last reading).
func settledRSS(ctx context.Context, pid int) (int64, error) {
	var last []int64
	for deadline := time.Now().Add(15 * time.Second); ; {
		v, err := processRSS(pid)
		if err != nil {
			return 0, err
		}
		last = append(last, v)
		if n := len(last); n > 4 && abs64(last[n-1]-last[n-5]) < 1<<20 || time.Now().After(deadline) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// processRSS is the resident set of pid in bytes (VmRSS of /proc/PID/status).
func processRSS(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseVmRSS(raw)
}

// parseVmRSS reads the VmRSS line of a /proc/PID/status: "VmRSS:	  123456 kB".
func parseVmRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("no VmRSS line (a kernel thread, or the process has exited)")
}

// raiseFileLimit raises this process's soft RLIMIT_NOFILE to its hard limit, and checks that
// it is at least need. Children started from now on inherit it (Go restores the original
// soft limit for children only when the program never set it itself).
func raiseFileLimit(need int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Max < uint64(need) {
		return fmt.Errorf("(w) needs %d open files in this process and in each server; the hard limit (ulimit -Hn) is %d", need, l.Max)
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// wsProgress prints one server's figures of a round.
func wsProgress(r int, cfg runConfig, k string, s *wsSample, o wsOptions) {
	name := map[string]string{"w": "web3gate", "w0": "anvil"}[k]
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	line := fmt.Sprintf("round %d/%d  (%s) %-8s %d sockets in %v; RSS %+.1f MiB, %.1f KiB/socket; delivery p50 %s ms, p99 %s ms (newHeads %s, logs %s); spread p99 %s ms; from the send p50 %s ms; %s ms server CPU/block + %s ms interrupts (%.2f CPU during the blocks; other processes %.2f CPU)",
		r+1, cfg.rounds, k, name, o.sockets(), s.connect.Round(100*time.Millisecond), float64(s.rssAfter-s.rssBefore)/(1<<20),
		s.rssPerSocket(o.sockets())/1024, ms(quantile(s.all, 0.5)), ms(quantile(s.all, 0.99)), ms(quantile(s.heads, 0.99)),
		ms(quantile(s.logs, 0.99)), ms(quantile(s.spread, 0.99)), ms(quantile(s.fromSend, 0.5)), ms(s.cpuPerBlock),
		ms(s.irqPerBlock), s.serverCores, s.otherCores)
	if len(s.problems) > 0 {
		line += "\n    !!! ERRORS: " + strings.Join(s.problems, "; ")
	}
	fmt.Println(line)
}

// reportWS prints (w) and (w0) against the targets.
func reportWS(w io.Writer, cfg runConfig, run *wsRun) {
	if run == nil || len(run.rounds) == 0 {
		return
	}
	o := run.opts
	pin := "the servers and this process share every CPU"
	if cfg.loadCPUs != "" {
		pin = fmt.Sprintf("the servers on CPU %s, the subscribers (this process) on CPU %s", cfg.serverCPUs, cfg.loadCPUs)
	}
	fmt.Fprintf(w, "\nws (w): %d newHeads + %d logs WebSocket subscribers (one socket each), %d measured blocks of %d ERC-20 Transfer events a round after %d warm-up blocks; %s; %d rounds\n",
		o.heads, o.logs, o.blocks, wsLogsPerBlock, o.warmups, pin, len(run.rounds))
	fmt.Fprintln(w, "delivery: the kernel's receive time of the block's (last) notification on the client socket, from when web3gate's feed saw the block / anvil was sent the transaction")
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, rd := range run.rounds {
		for k, s := range rd {
			add("rss "+k, s.rssPerSocket(o.sockets()))
			add("p50 "+k, msf(quantile(s.all, 0.5)))
			add("p99 "+k, msf(quantile(s.all, 0.99)))
			add("max "+k, msf(quantile(s.all, 1)))
			add("heads p99 "+k, msf(quantile(s.heads, 0.99)))
			add("logs p99 "+k, msf(quantile(s.logs, 0.99)))
			add("spread p50 "+k, msf(quantile(s.spread, 0.5)))
			add("spread p99 "+k, msf(quantile(s.spread, 0.99)))
			add("send p50 "+k, msf(quantile(s.fromSend, 0.5)))
			add("send p99 "+k, msf(quantile(s.fromSend, 0.99)))
			add("seen p99 "+k, msf(quantile(s.seen, 0.99)))
			add("cpu "+k, msf(s.cpuPerBlock))
			add("irq "+k, msf(s.irqPerBlock))
			add("cores "+k, s.serverCores)
			add("other "+k, s.otherCores)
			add("connect "+k, s.connect.Seconds())
			if s.hasGo {
				add("heap "+k, s.heapPer)
				add("stack "+k, s.stackPer)
				add("goroutines "+k, s.goroutinesPer)
			}
		}
	}
	med := func(k string) float64 { return median(series[k]) }
	// val is the median of k with its unit, and the range over the rounds; "—" without data.
	val := func(k, format, unit string, div float64) (string, string) {
		xs := series[k]
		if len(xs) == 0 {
			return "—", ""
		}
		return fmt.Sprintf(format+" %s", median(xs)/div, unit), fmt.Sprintf(format+"–"+format, slices.Min(xs)/div, slices.Max(xs)/div)
	}
	ratio := func(k string) string {
		if len(series[k+" w"]) == 0 || len(series[k+" w0"]) == 0 || med(k+" w0") == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", med(k+" w")/med(k+" w0"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure (median of the rounds)\t(w) web3gate\trange\t(w0) anvil\trange\tw/w0\ttarget\tresult\t")
	// row prints measure k; target is "" or the target's text, with pass telling whether the
	// median of (w) meets it.
	row := func(name, k, format, unit string, div float64, target string, pass func(float64) bool) {
		wv, wr := val(k+" w", format, unit, div)
		av, ar := val(k+" w0", format, unit, div)
		res := ""
		switch {
		case target == "":
		case len(series[k+" w"]) == 0:
			res = "no data"
		default:
			res = verdict(pass(med(k + " w")))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, wv, wr, av, ar, ratio(k), target, res)
	}
	row("RSS per idle subscribed socket", "rss", "%.1f", "KiB", 1024, fmt.Sprintf("≤ %d KiB", targetWSPerSoc/1024),
		func(v float64) bool { return v <= targetWSPerSoc })
	row("delivery p50, every subscriber", "p50", "%.1f", "ms", 1, "", nil)
	row("delivery p99, every subscriber", "p99", "%.1f", "ms", 1, fmt.Sprintf("≤ %.0f ms", msf(targetWSP99)),
		func(v float64) bool { return v <= msf(targetWSP99) })
	row("delivery max", "max", "%.1f", "ms", 1, "", nil)
	row("delivery p99, newHeads", "heads p99", "%.1f", "ms", 1, "", nil)
	row("delivery p99, logs (the 100th log)", "logs p99", "%.1f", "ms", 1, "", nil)
	row("spread p50 (from the block's first delivery)", "spread p50", "%.1f", "ms", 1, "", nil)
	row("spread p99", "spread p99", "%.1f", "ms", 1, "", nil)
	row("from the send p50 (web3gate: with the feed's poll)", "send p50", "%.1f", "ms", 1, "", nil)
	row("from the send p99", "send p99", "%.1f", "ms", 1, "", nil)
	row("p99 as this process read it", "seen p99", "%.1f", "ms", 1, "", nil)
	row("server CPU per block", "cpu", "%.1f", "ms", 1, "", nil)
	row("interrupts per block (the sockets' TCP receive path)", "irq", "%.1f", "ms", 1, "", nil)
	row("server's CPU use during the blocks", "cores", "%.2f", "CPU", 1, "", nil)
	row("other processes' CPU use during the blocks", "other", "%.2f", "CPU", 1, "", nil)
	row("opening and subscribing every socket", "connect", "%.1f", "s", 1, "", nil)
	tw.Flush()
	if len(series["heap w"]) > 0 {
		fmt.Fprintf(w, "web3gate per socket, from its Go metrics: heap in use %.1f KiB, goroutine stacks %.1f KiB, %.2f goroutines\n",
			med("heap w")/1024, med("stack w")/1024, med("goroutines w"))
	}
	if bad := wsFailures(run); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE SUBSCRIBERS GOT ERRORS: these figures are not valid !!!!!\n%s\n", bad)
	}
}

// wsFailures lists the rounds that went wrong, "" when none did.
func wsFailures(run *wsRun) string {
	if run == nil {
		return ""
	}
	var lines []string
	for i, rd := range run.rounds {
		for _, k := range []string{"w0", "w"} {
			if s := rd[k]; s != nil && len(s.problems) > 0 {
				lines = append(lines, fmt.Sprintf("  round %d, (%s): %s", i+1, k, strings.Join(s.problems, "; ")))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// ethereumCall is the eth_estimateGas call of data from from to to.
func ethereumCall(from, to common.Address, data []byte) ethereum.CallMsg {
	return ethereum.CallMsg{From: from, To: &to, Data: data}
}

// pinSelf pins every thread of this process to cpus (threads started later inherit it) and
// returns the function that undoes it: (w)'s subscribers run in this process, on the load's
// CPUs like wrk, while the servers run on theirs.
func pinSelf(cpus []int) (restore func(), err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	apply := func(s *unix.CPUSet) error {
		// Twice: a thread started during the first pass by an unpinned one is caught by the second.
		for range 2 {
			tasks, err := os.ReadDir("/proc/self/task")
			if err != nil {
				return err
			}
			for _, t := range tasks {
				tid, err := strconv.Atoi(t.Name())
				if err != nil {
					continue
				}
				if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("sched_setaffinity of thread %d: %w", tid, err)
				}
			}
		}
		return nil
	}
	if err := apply(&set); err != nil {
		return nil, err
	}
	return func() { _ = apply(&old) }, nil
}
