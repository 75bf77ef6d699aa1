//go:build linux

package main

// The finality-aware cache measurement:
//
//	(t) a replayed dApp workload through web3gate in front of one anvil node, with the
//	    response cache on and, in the same rounds, off: the share of calls answered without an
//	    upstream call, the upstream calls per client call, and p50/p99 latency. Target: at
//	    least 70 % answered locally and p99 at most half of the uncached run's.
//
// The trace: anvil mines cacheTraceBlocks empty blocks first (its finalized tag is 64 below
// the head, so blocks 1..cacheFinalMax are final throughout), and a block every
// cacheBlockEvery while the trace runs (the head moves, so head entries come and go). 1,000
// distinct calls (keys) are drawn with a fixed seed: 80 % at a finalized block or a block
// hash (eth_call 25 %, eth_getBalance 20 %, eth_getBlockByNumber 12 %, eth_getLogs over a
// range of 1 to 16 blocks 12 %, eth_getTransactionCount 10 %, eth_getCode 6 %,
// eth_getStorageAt 5 %, eth_getBlockReceipts 5 %, eth_getBlockByHash 5 %; addresses from 50:
// anvil's 10 dev accounts and 40 others) and 20 % at `latest` (eth_call, eth_getBalance,
// eth_getTransactionCount, eth_getCode, eth_getBlockByNumber). Each key has two spellings
// (lowercase or checksummed address, minimal or zero-padded block number) and a request takes
// either at random. The trace is cacheTraceCalls requests whose keys follow a Zipf law
// (s = 1.1) over a random ranking of the 1,000 keys: a few calls are asked very often, most
// rarely, as the calls of a dApp's front ends are. cacheWorkers clients replay it, each
// taking the next request when its previous one is answered.
//
// Upstream calls are counted by a proxy of the bench in front of anvil, which leaves out the
// gateway's node polls (eth_chainId, eth_blockNumber: the same with the cache on or off) and
// counts apart the polls of the latest and finalized blocks (eth_getBlockByNumber("latest" or
// "finalized", false) as web3gate spells them: the cache's finality poll; the trace's own
// latest-block call is spelled with spaces, so it counts as an upstream call).
// The first cacheWarmCalls of the trace are replayed unmeasured: the figures are those of a
// gateway that has been serving the dApp for a while, not of one just started.
//
// Each measured call is classed as answered locally or upstream by the counting proxy: it
// counts the requests it forwards by method and params (web3gate forwards the params as the
// client sent them), and a call whose method and params the proxy forwarded while the call
// was in flight went upstream (a call that shared, by coalescing, another's upstream request
// is classed upstream too: it waited for it). The latency distributions of the two classes
// are reported apart, for the cache on; with it off every call goes upstream.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	cacheTraceBlocks = 300
	cacheFinalMax    = 200 // ≤ head − 64 while the trace runs
	cacheKeys        = 1000
	cacheTraceCalls  = 50000
	cacheWarmCalls   = 10000 // the first calls of the trace, replayed unmeasured (the cache warms up)
	cacheWorkers     = 2
	cacheBlockEvery  = 2 * time.Second
	targetCacheLocal = 0.70 // share of calls answered without an upstream call
	targetCacheP99   = 0.5  // p99 with the cache / p99 without
)

// cacheRun is the whole measurement.
type cacheRun struct {
	rounds   []map[string]*cacheSample // "on", "off"
	problems []string
}

// cacheSample is one replay of the trace through one gateway.
type cacheSample struct {
	calls    int
	upstream int // upstream calls of the trace (polls left out)
	finality int // calls of the cache's finality poll during the replay
	errors   int
	p50, p95 time.Duration
	p99      time.Duration
	elapsed  time.Duration
	// hit and miss are the latency percentiles of the calls answered locally and of those
	// that went upstream (see the top of the file).
	hit, miss classLatency
	// node is the anvil round trip (as the counting proxy timed it) of the calls that went
	// upstream: what of miss is the node's.
	node classLatency
	// clientGCs and clientAlloc are the garbage collections and bytes allocated in the
	// bench's own process (the clients and the counting proxy) during the replay.
	clientGCs   int
	clientAlloc uint64
	// gwPreempted and clientPreempted are the involuntary context switches of web3gate's
	// threads and of the bench process's during the replay: how often the scheduler took a
	// CPU from them while they could run (the two cores are shared with anvil and whatever
	// else runs on the machine).
	gwPreempted, clientPreempted int64
}

// preemptions is the sum of nonvoluntary_ctxt_switches over the threads of process pid
// ("self": this one); 0 when /proc cannot tell.
func preemptions(pid string) int64 {
	tasks, _ := filepath.Glob("/proc/" + pid + "/task/*/status")
	var n int64
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}

// classLatency is the latency distribution of one class of calls.
type classLatency struct {
	n                  int
	p50, p90, p99, max time.Duration
}

func classOf(lat []time.Duration) classLatency {
	if len(lat) == 0 {
		return classLatency{}
	}
	slices.Sort(lat)
	return classLatency{n: len(lat), p50: lat[len(lat)/2], p90: lat[len(lat)*90/100], p99: lat[len(lat)*99/100], max: lat[len(lat)-1]}
}

// measureCache starts anvil, a counting proxy, web3gate with the cache on and with it off,
// and replays the trace through each, in alternating order each round.
func measureCache(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string) (*cacheRun, error) {
	cred, err := newCredentials()
	if err != nil {
		return nil, err
	}
	fmt.Println("cache: starting anvil, a counting proxy and web3gate with the cache on and off...")
	anvil := &target{key: "anvil", body: chainIDBody, headers: cred.headers()}
	if err := startAnvil(ctx, cs, cfg.serverCPUs, anvilBin, anvil); err != nil {
		return nil, err
	}
	node := func(method, params string) (json.RawMessage, error) {
		t := *anvil
		t.body = `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
		return rpcResult(&t)
	}
	if _, err := node("anvil_mine", `["`+hexU(cacheTraceBlocks)+`"]`); err != nil {
		return nil, fmt.Errorf("anvil_mine: %w", err)
	}
	hashes := make([]string, 0, 50)
	for n := uint64(1); n <= 50; n++ {
		res, err := node("eth_getBlockByNumber", `["`+hexU(n)+`",false]`)
		if err != nil {
			return nil, err
		}
		hashes = append(hashes, jsonField(res, "hash"))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	up := &upstreamCounter{url: "http://" + ln.Addr().String(), target: anvil.url,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	srv := &http.Server{Handler: up, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	dir := env.tmp
	gw := map[string]*target{}
	for _, g := range []struct{ key, cache string }{
		{"on", "  enabled: true\n  local: true\n  coalesce: true\n"},
		{"off", "  enabled: false\n  coalesce: false\n"},
	} {
		c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (cache "+g.key+")",
			anvilGatewayConfig(dir, "web3gate-cache-"+g.key+".yaml", "(t), the cache "+g.key, up.url, cred, g.cache, ""))
		if err != nil {
			return nil, err
		}
		gw[g.key] = &target{key: g.key, url: api + "/v1/web3/mainnet", admin: admin, headers: cred.headers(), servers: []*child{c}}
	}

	keys := cacheKeySet(rand.New(rand.NewPCG(1, 2)), hashes)
	trace := cacheTrace(rand.New(rand.NewPCG(3, 4)), keys)

	// The head moves while the trace runs, as on a live chain.
	mineCtx, stopMining := context.WithCancel(ctx)
	defer stopMining()
	go func() {
		t := time.NewTicker(cacheBlockEvery)
		defer t.Stop()
		for {
			select {
			case <-mineCtx.Done():
				return
			case <-t.C:
				_, _ = node("evm_mine", "[]")
			}
		}
	}()

	run := &cacheRun{}
	order := []string{"on", "off"}
	for r := range cfg.rounds {
		if r%2 == 1 {
			order = []string{"off", "on"}
		} else {
			order = []string{"on", "off"}
		}
		round := map[string]*cacheSample{}
		for _, k := range order {
			if _, err := replay(ctx, gw[k], trace[:cacheWarmCalls], up); err != nil {
				return run, err
			}
			s, err := replay(ctx, gw[k], trace[cacheWarmCalls:], up)
			if err != nil {
				return run, err
			}
			round[k] = s
			fmt.Printf("round %d/%d  (t) cache %-3s  %d calls in %v, %d upstream (%.3f per call), polls of latest/finalized %d, p50 %.0f µs, p99 %.0f µs, errors %d\n",
				r+1, cfg.rounds, k, s.calls, s.elapsed.Round(time.Millisecond), s.upstream, float64(s.upstream)/float64(s.calls),
				s.finality, us(s.p50), us(s.p99), s.errors)
			fmt.Printf("             local: %s; upstream: %s; of which anvil: p50 %.0f µs, p90 %.0f µs, p99 %.0f µs\n", s.hit, s.miss, us(s.node.p50), us(s.node.p90), us(s.node.p99))
			fmt.Printf("             the bench process (clients, counting proxy): %d GCs, %.1f KiB allocated per call; preempted: web3gate %d times, the bench process %d\n",
				s.clientGCs, float64(s.clientAlloc)/1024/float64(s.calls), s.gwPreempted, s.clientPreempted)
			if s.errors > 0 {
				run.problems = append(run.problems, fmt.Sprintf("  round %d, cache %s: %d calls answered with an error", r+1, k, s.errors))
			}
		}
		run.rounds = append(run.rounds, round)
	}
	return run, nil
}

func (c classLatency) String() string {
	return fmt.Sprintf("%d calls, p50 %.0f µs, p90 %.0f µs, p99 %.0f µs, max %.0f µs", c.n, us(c.p50), us(c.p90), us(c.p99), us(c.max))
}

// replay sends the trace to t with cacheWorkers clients and measures it.

func replay(ctx context.Context, t *target, trace []traceCall, up *upstreamCounter) (*cacheSample, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cacheWorkers}}
	defer client.CloseIdleConnections()
	lat := make([]time.Duration, len(trace))
	upstream := make([]bool, len(trace))
	node := make([]time.Duration, len(trace))
	var next, errs atomic.Int64
	var firstErr error
	var errOnce sync.Once
	up0, fin0 := up.calls.Load(), up.finality.Load()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	gwPID := "0"
	if len(t.servers) > 0 && t.servers[0].cmd.Process != nil {
		gwPID = strconv.Itoa(t.servers[0].cmd.Process.Pid)
	}
	gwPre0, selfPre0 := preemptions(gwPID), preemptions("self")
	start := time.Now()
	var wg sync.WaitGroup
	for range cacheWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(trace) || ctx.Err() != nil {
					return
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(trace[i].body))
				for _, h := range t.headers {
					req.Header.Set(h[0], h[1])
				}
				before := up.forwards(trace[i].forward)
				t0 := time.Now()
				resp, err := client.Do(req)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				lat[i] = time.Since(t0)
				if upstream[i] = up.forwards(trace[i].forward) != before; upstream[i] {
					if v, ok := up.forwarded.Load(trace[i].forward); ok {
						node[i] = time.Duration(v.(*forwarded).node.Load())
					}
				}
				if err != nil || !bytes.Contains(body, []byte(`"result"`)) {
					errs.Add(1)
					errOnce.Do(func() { firstErr = fmt.Errorf("%s → %s %v", trace[i].body, body, err) })
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s := &cacheSample{calls: len(trace), upstream: int(up.calls.Load() - up0), finality: int(up.finality.Load() - fin0),
		errors: int(errs.Load()), elapsed: time.Since(start)}
	runtime.ReadMemStats(&ms1)
	s.clientGCs, s.clientAlloc = int(ms1.NumGC-ms0.NumGC), ms1.TotalAlloc-ms0.TotalAlloc
	s.gwPreempted, s.clientPreempted = preemptions(gwPID)-gwPre0, preemptions("self")-selfPre0
	var hits, misses, nodes []time.Duration
	for i, d := range lat {
		if upstream[i] {
			misses = append(misses, d)
			nodes = append(nodes, node[i])
		} else {
			hits = append(hits, d)
		}
	}
	s.hit, s.miss, s.node = classOf(hits), classOf(misses), classOf(nodes)
	slices.Sort(lat)
	s.p50, s.p95, s.p99 = lat[len(lat)/2], lat[len(lat)*95/100], lat[len(lat)*99/100]
	if s.errors > 0 {
		fmt.Println("  first error:", firstErr)
	}
	return s, nil
}
