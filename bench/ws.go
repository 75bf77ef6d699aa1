//go:build linux

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
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/contracts"
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
	// node: also (wn) and (wp), web3gate fed by an anvil node, polling it and pushed by it.
	node bool
	// nodeOnly: (wn), (wp) and (w0) without (w), for quick iterations.
	nodeOnly bool
	// floorBin is bench/wsfloor, built: (wf), the write floor, runs with (wn) and (wp).
	floorBin string
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
	// feedCallsPerBlock: web3gate's feed upstream calls per measured block
	// (web3gate_feed_upstream_calls_total), hasFeedCalls when read.
	feedCallsPerBlock float64
	hasFeedCalls      bool
	problems          []string
}

func (s wsSample) rssPerSocket(n int) float64 { return float64(s.rssAfter-s.rssBefore) / float64(n) }

// wsRun is the whole measurement.
type wsRun struct {
	opts   wsOptions
	rounds []map[string]*wsSample // "w" and "w0"
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
		for _, k := range wsOrder(r, o) {
			if k == "w0" && o.noAnvil {
				continue
			}
			roundDir := filepath.Join(dir, fmt.Sprintf("round%d-%s", r+1, k))
			if err := os.Mkdir(roundDir, 0o700); err != nil {
				return run, err
			}
			var s *wsSample
			var err error
			if k == "wf" {
				s, err = wsFloorRound(ctx, cs, cfg, o)
			} else {
				s, err = wsRound(ctx, cs, cfg, env, anvilBin, roundDir, k, o)
			}
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

// wsOrder is the order of the servers in round r: anvil first in odd rounds (counted from 1),
// last in even ones; with o.node, (wn) and (wp) after (w), in alternating order too.
func wsOrder(r int, o wsOptions) []string {
	ks := []string{"w0"}
	if !o.nodeOnly {
		ks = append(ks, "w")
	}
	if o.node || o.nodeOnly {
		ks = append(ks, "wn", "wp", "wf")
	}
	if r%2 == 1 {
		slices.Reverse(ks)
	}
	return ks
}

// wsRound measures one server: k "w" (web3gate) or "w0" (anvil).
func wsRound(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin, dir, k string, o wsOptions) (*wsSample, error) {
	srv, err := startWSServer(ctx, cs, cfg, env, anvilBin, dir, k, o)
	if err != nil {
		return nil, err
	}
	defer srv.stop(cs)
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
	var ac *wsClient // the bench's own socket on the node, whose newHeads announce the blocks
	if srv.announce != "" {
		ac = newWSClient(srv.announce, http.Header{}, wsLogsPerBlock)
		defer ac.close()
		if err := ac.subscribeAll(ctx, 1, 0, 1, ""); err != nil {
			return nil, fmt.Errorf("%s: the announcer socket: %w", srv.name, err)
		}
	}
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
	var calls0, calls1 float64 // the feed's upstream calls before the measured blocks and after
	for b := range o.warmups + o.blocks {
		if b == o.warmups && srv.admin != "" {
			if calls0, err = feedCalls(srv.admin); err != nil {
				return nil, err
			}
		}
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
	if srv.admin != "" && len(hashes) > o.warmups {
		if calls1, err = feedCalls(srv.admin); err != nil {
			return nil, err
		}
		s.feedCallsPerBlock, s.hasFeedCalls = (calls1-calls0)/float64(len(hashes)-o.warmups), true
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
	if ac != nil {
		if _, err := ac.waitDone(ctx, int64(len(numbers)), wsDeliverLimit); err != nil {
			return nil, err
		}
		if starts, err = announcements(ac, numbers); err != nil {
			return nil, err
		}
	} else if srv.sightFromFeed {
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
