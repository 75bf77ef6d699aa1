//go:build linux

package main

// The shared cache measurement:
//
//	(r) a cached read through a replica whose local cache is cold and whose Redis is warm:
//	    eth_getBlockByHash of anvil's genesis block, sent to a web3gate whose response cache
//	    has no in-process level (cache.local: false), so that every request is a local miss
//	    answered by a Redis GET; against (b), web3gate answering eth_chainId itself, measured
//	    in the same rounds. Target: throughput r/b ≥ 0.5.
//
// The local miss is made honest by configuration, not by luck: without an in-process level
// every request asks Redis, and with coalescing off (cache.coalesce: false) no two requests
// share a lookup. Each run checks it from web3gate's metrics: one Redis hit per request, no
// eth_getBlockByHash sent upstream. Redis is a private redis-server (no persistence) on the
// servers' CPUs, its CPU counted with (r)'s: on a real deployment Redis runs elsewhere and
// (r) would cost web3gate's share alone. The upstream is an anvil node, idle during the load.
// (r)'s redis.timeout is 1s instead of 50ms: on a machine shared with other processes a
// Redis answer is sometimes held longer than 50 ms, and the back-off that follows (by
// design: the reads go to the upstream) would not be what (r) measures.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const targetRB = 0.5 // throughput of a Redis-answered read, relative to web3gate's own eth_chainId

// redisRun is the whole measurement.
type redisRun struct {
	b, r     *target
	block    string // the hash read
	rounds   []map[string]sample
	lat      []map[string]sample
	problems []string
	notes    []string
}

// measureRedis starts redis-server, anvil, (b) and (r), and measures (b) and (r) in
// alternating order, throughput then latency at concurrency 1.
func measureRedis(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string) (*redisRun, error) {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("(r) needs redis-server (apt-get install redis-server): %w", err)
	}
	dir, err := os.MkdirTemp(env.tmp, "redis-")
	if err != nil {
		return nil, err
	}
	cred, err := newCredentials()
	if err != nil {
		return nil, err
	}
	fmt.Println("redis: starting redis-server, anvil, (b) and (r)...")
	var redisAddr string
	redisChild, _, err := startServer(ctx, cs, "redis-server", cfg.serverCPUs, redisBin, 1,
		func(p []int) ([]string, error) {
			redisAddr = fmt.Sprintf("127.0.0.1:%d", p[0])
			return []string{"--port", strconv.Itoa(p[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
				"--dir", dir, "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"}, nil
		},
		func([]int) error { return redisPing(redisAddr) })
	if err != nil {
		return nil, err
	}
	anvil := &target{key: "anvil", body: chainIDBody, headers: cred.headers()}
	if err := startAnvil(ctx, cs, cfg.serverCPUs, anvilBin, anvil); err != nil {
		return nil, err
	}
	probe := *anvil
	probe.body = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x0",false]}`
	genesis, err := rpcResult(&probe)
	if err != nil {
		return nil, fmt.Errorf("anvil's genesis block: %w", err)
	}
	hash := jsonField(genesis, "hash")
	if len(hash) != 66 {
		return nil, fmt.Errorf("anvil's genesis block has no hash: %s", genesis)
	}

	rr := &redisRun{block: hash}
	rr.b = &target{key: "b", name: "web3gate eth_chainId", body: chainIDBody, headers: devHeaders}
	wb, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (dev chain)", devConfig(env.root, dir))
	if err != nil {
		return nil, err
	}
	rr.b.url, rr.b.admin, rr.b.servers = api+"/v1/web3/mainnet", admin, []*child{wb}
	rr.r = &target{key: "r", name: "web3gate, Redis hit", headers: cred.headers(),
		body: `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByHash","params":["` + hash + `",false]}`}
	wr, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (redis)", redisConfig(dir, anvil.url, redisAddr, cred))
	if err != nil {
		return nil, err
	}
	rr.r.url, rr.r.admin, rr.r.servers = api+"/v1/web3/mainnet", admin, []*child{wr, redisChild}

	// The first request fills Redis; the second must be a Redis hit.
	before, err := scrape(rr.r.admin)
	if err != nil {
		return nil, err
	}
	for i := range 2 {
		res, err := rpcResult(rr.r)
		if err != nil {
			return nil, fmt.Errorf("check (r) request %d: %w", i+1, err)
		}
		if jsonField(res, "hash") != hash {
			return nil, fmt.Errorf("check (r): answered %s, want block %s", res, hash)
		}
		time.Sleep(50 * time.Millisecond) // the fill is written in the background
	}
	after, err := scrape(rr.r.admin)
	if err != nil {
		return nil, err
	}
	if d := after.sub(before); d.redisLookups["miss"] != 1 || d.redisLookups["hit"] != 1 || d.upstreamMethods["eth_getBlockByHash"] != 1 {
		return nil, fmt.Errorf("check (r): Redis lookups %v and upstream calls %v, want one miss filled from the upstream and then one hit",
			d.redisLookups, d.upstreamMethods)
	}
	if _, err := rpcResult(rr.b); err != nil {
		return nil, fmt.Errorf("check (b): %w", err)
	}
	for _, t := range []*target{rr.b, rr.r} {
		if t.script, err = writeScript(dir, t); err != nil {
			return nil, err
		}
	}

	ts := []*target{rr.b, rr.r}
	for r := range cfg.rounds {
		tput, lat := map[string]sample{}, map[string]sample{}
		for _, l := range []struct {
			load load
			into map[string]sample
			what func(sample) string
		}{
			{cfg.load, tput, func(s sample) string { return fmt.Sprintf("%9.0f req/s", s.wrk.Rate()) }},
			{cfg.latency, lat, func(s sample) string { return fmt.Sprintf("p50 %5.0f µs at c=1", us(s.wrk.P50)) }},
		} {
			for _, i := range order(len(ts), r) {
				s, err := measure(ctx, cs, cfg, ts[i], l.load)
				if err != nil {
					return rr, err
				}
				l.into[ts[i].key] = s
				progress(r, cfg, ts[i], s, l.what(s))
				if ts[i] == rr.r {
					rr.checkHits(r, s)
				}
			}
		}
		rr.rounds = append(rr.rounds, tput)
		rr.lat = append(rr.lat, lat)
	}
	return rr, nil
}

// checkHits records a problem unless the requests of the sample (warm-up included) were
// Redis hits: at least one hit per request wrk counted (wrk does not count the requests in
// flight when it stops, the server does), and other lookups (a GET that timed out on a busy
// machine, answered from the upstream) at most 0.1 % of them, noted.
func (rr *redisRun) checkHits(round int, s sample) {
	n := float64(s.warm.Requests + s.wrk.Requests)
	d := s.calls
	other := 0.0
	for k, v := range d.redisLookups {
		if k != "hit" {
			other += v
		}
	}
	if other > 0 {
		rr.notes = append(rr.notes, fmt.Sprintf("round %d, (r): %.0f of %.0f Redis lookups were not hits (%v), answered from the upstream", round+1, other, n, d.redisLookups))
	}
	if d.redisLookups["hit"]+other < n || other > n/1000 {
		rr.problems = append(rr.problems, fmt.Sprintf("  round %d, (r): %.0f requests, Redis lookups %v, eth_getBlockByHash upstream %.0f: not every request was a Redis hit",
			round+1, n, d.redisLookups, d.upstreamMethods["eth_getBlockByHash"]))
	}
}

// redisConfig is (r): mainnet is the anvil node, the response cache without an in-process
// level and without coalescing, Redis at addr.
func redisConfig(dir, anvilURL, addr string, cred credentials) func(api, admin int) (string, error) {
	return anvilGatewayConfig(dir, "web3gate-redis.yaml", "(r), a replica whose local cache is off and whose Redis is warm",
		anvilURL, cred, "  local: false\n  coalesce: false\n", fmt.Sprintf(`redis:
  url: redis://%s/0
  keyPrefix: "bench:"
  # Not the default 50ms: other processes of a shared machine can hold a Redis answer that
  # long, and the back-off that follows would measure the upstream instead.
  timeout: 1s
`, addr))
}

// redisPing sends PING to the Redis at addr and checks for PONG.
func redisPing(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return errors.New("another server has the port: PING answered " + strconv.Quote(string(buf)))
	}
	return nil
}

// jsonField is the string member name of the JSON object raw, "" when absent.
func jsonField(raw []byte, name string) string {
	_, rest, ok := strings.Cut(string(raw), `"`+name+`":"`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// report prints the rounds and the medians of (b) and (r).
func (rr *redisRun) report(w io.Writer, cfg runConfig) {
	if rr == nil || len(rr.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\n===== shared cache: (r) a Redis hit against (b) =====\n")
	fmt.Fprintf(w, "(r) eth_getBlockByHash %s… through web3gate with cache.local: false and cache.coalesce: false, each request one Redis GET;\n", rr.block[:10])
	fmt.Fprintf(w, "    its servers: web3gate and redis-server on the same CPUs; throughput %s, latency %s\n", cfg.load, cfg.latency)
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\t(b) req/s\t(r) req/s\tr/b\tp50 b µs\tp50 r µs\t(b) CPU µs/req\t(r) web3gate + redis CPU µs/req\t")
	for i, rd := range rr.rounds {
		b, r := rd["b"], rd["r"]
		rb := r.wrk.Rate() / b.wrk.Rate()
		add("rate b", b.wrk.Rate())
		add("rate r", r.wrk.Rate())
		add("r/b", rb)
		add("p50 b", us(rr.lat[i]["b"].wrk.P50))
		add("p50 r", us(rr.lat[i]["r"].wrk.P50))
		add("cpu b", us(b.cpuPerRequest()))
		add("cpu r", us(r.cpuPerRequest()))
		web, red := 0.0, 0.0
		if len(r.perServer) == 2 && r.wrk.Requests > 0 {
			web, red = us(r.perServer[0])/float64(r.wrk.Requests), us(r.perServer[1])/float64(r.wrk.Requests)
		}
		add("cpu r web3gate", web)
		add("cpu r redis", red)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%.0f\t%.0f\t%.1f\t%.1f + %.1f\t\n", i+1, rate(b), rate(r), rb,
			us(rr.lat[i]["b"].wrk.P50), us(rr.lat[i]["r"].wrk.P50), us(b.cpuPerRequest()), web, red)
	}
	tw.Flush()
	med := func(k string) float64 { return median(series[k]) }
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\ttarget\tresult\t")
	fmt.Fprintf(tw, "(b) / (r) req/s\t%.0f / %.0f\t\t\t\t\n", med("rate b"), med("rate r"))
	fmt.Fprintf(tw, "throughput r/b (Redis hit)\t%.3f\t%.3f–%.3f\t≥ %.2f\t%s\t\n", med("r/b"), slices.Min(series["r/b"]), slices.Max(series["r/b"]), targetRB, verdict(med("r/b") >= targetRB))
	fmt.Fprintf(tw, "r/b from the servers' CPU per request\t%.3f\t\t\t\t\n", med("cpu b")/med("cpu r"))
	fmt.Fprintf(tw, "the same, web3gate's CPU alone (Redis elsewhere)\t%.3f\t\t\t\t\n", med("cpu b")/med("cpu r web3gate"))
	fmt.Fprintf(tw, "(r) CPU per request: web3gate + redis-server\t%.1f + %.1f µs\t\t\t\t\n", med("cpu r web3gate"), med("cpu r redis"))
	fmt.Fprintf(tw, "p50 at c=1, (b) / (r)\t%.0f / %.0f µs\t\t\t\t\n", med("p50 b"), med("p50 r"))
	tw.Flush()
	other := 0.0
	for i, rd := range rr.rounds {
		for _, m := range []map[string]sample{rd, rr.lat[i]} {
			for _, s := range m {
				other = max(other, s.cores(s.otherCPU()))
			}
		}
	}
	if other > 0.1 {
		fmt.Fprintf(w, "note: other processes used up to %.2f CPU during a run: the rates are noisy (a target of two server processes, (r), gets a larger share of a contended CPU than one, (b)); the ratio from CPU per request is less disturbed\n", other)
	}
	for _, n := range rr.notes {
		fmt.Fprintln(w, "note:", n)
	}
	if bad := rr.failures(); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE LOAD GOT ERRORS: these rates are not valid !!!!!\n%s\n", bad)
	}
}

// failures lists the runs that got errors or were not all Redis hits, "" when none.
func (rr *redisRun) failures() string {
	if rr == nil {
		return ""
	}
	lines := slices.Clone(rr.problems)
	for i, rd := range rr.rounds {
		for _, m := range []map[string]sample{rd, rr.lat[i]} {
			for _, k := range []string{"b", "r"} {
				if p := m[k].problems(); p != "" {
					lines = append(lines, fmt.Sprintf("  round %d, (%s): %s", i+1, k, p))
				}
			}
		}
	}
	return strings.Join(lines, "\n")
}
