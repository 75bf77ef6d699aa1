//go:build linux

// Command bench measures web3gate's throughput and latency against baselines measured the
// same way in the same run, and prints the ratios next to their targets:
//
//	(a) bench/bare, a bare fasthttp server answering a constant JSON-RPC reply
//	(b) web3gate answering eth_chainId itself (the shipped config.yaml, embedded dev chain)
//	(c) an anvil node answering eth_getBalance at "latest"
//	(d) web3gate forwarding that eth_getBalance to the anvil node, cache and in-flight
//	    coalescing off, upstream batching at its defaults (every call still reaches anvil)
//	(e) with -forwarder, bench/bare -upstream: a plain fasthttp forwarder in front of the same
//	    anvil, one upstream request per call: what an extra HTTP hop costs when it only forwards
//	(h) web3gate (b)'s process answering GET /v1/tokens/60/1337/{contract}/1 from its cache
//	    (an on-chain ERC721 deployed through it before the load)
//
// and custodial signing (signing.go), each round on a fresh web3gate with its own store:
//
//	(f) eth_signTransaction: signatures per second from one dev account
//	(g) eth_sendTransaction: sends per second from one dev account, sustained over
//	    -send-duration, every send mined with no nonce gap
//
// and the product catalog (products.go):
//
//	(p) GET /v1/products over 100,000 imported products: each kind of list, and a mix of
//	    them, at concurrency 1
//
// and the NFT owners index (owners.go):
//
//	(i) ingest: a fresh web3gate indexing 1,000,000 NFT transfers from an anvil node, logs/s
//	(o) GET /v1/owners over that index: each kind of query, and a mix, at concurrency 1
//
// and the replicas' shared cache (redis.go):
//
//	(r) a cached eth_getBlockByHash through a web3gate whose local cache is off
//	    (cache.local: false) and whose Redis (a private redis-server) holds the answer, against
//	    (b) measured in the same rounds
//
// and the rate limits (ratelimit.go):
//
//	(l) web3gate answering eth_chainId itself as (b), every request charged a compute unit by
//	    the rate-limit stage (a budget it never spends), against (b) without the stage in the
//	    same rounds. Target: throughput l/b ≥ 0.95
//
// and real-time delivery over WebSocket (ws.go):
//
//	(w) 10,000 newHeads and 1,000 logs subscribers, one socket each, on web3gate's embedded
//	    dev chain, blocks of 100 ERC-20 Transfer events: delivery latency and RSS per idle
//	    socket, against (w0) the same subscribers on one anvil node in the same rounds
//
// and the finality-aware response cache (cache.go):
//
//	(t) a replayed dApp workload (1,000 distinct calls, Zipf repeats) through web3gate in
//	    front of one anvil node, the cache on against off in the same rounds
//
// and fee bumping (bump.go):
//
//	(k) 200 transactions from 20 accounts priced out by a base-fee spike on anvil (a block a
//	    second): the time until all are mined with bumping on, against the same run with
//	    bumping off, and how many are mined within 60 s in each
//
// and the idle footprint (idle.go):
//
//	(z1) the RSS of a web3gate serving nothing, the dev chain off, one anvil upstream, no
//	     Redis, SQLite, its binary read from the disk at the start (out of the page cache);
//	     (z2) the same of the shipped config.yaml (dev chain on), for reference; (z3) (z1)
//	     on a build without the dev chain (-tags nodevchain); the binary's sizes, and the
//	     package initialisation costs (inittrace). Target: (z1) ≤ 40 MiB
//
// Targets: throughput b/a ≥ 0.85, d/c ≥ 0.60, h/b ≥ 0.80, and the p50 latency at concurrency 1 that web3gate
// adds in front of anvil (d − c) ≤ 50 µs; (f) ≥ 5,000 signatures/s and (g) ≥ 1,000 sends/s on
// the machine; (p) p99 ≤ 5 ms; (i) ≥ 50,000 logs/s and (o) p99 ≤ 5 ms; r/b ≥ 0.5; (w) p99 ≤ 50 ms over
// every subscriber and ≤ 20 KiB RSS per idle socket; (t) ≥ 70 % of calls answered without an
// upstream call and p99 at most half of the uncached run's. It is a measurement, not a test: it exits 0 whether the targets are met or not,
// and 1 when something could not run, the load got errors, or (g)'s nonces do not add up.
// -only proxy measures (a)-(e) alone, -only signing (f), (g) and (g') alone, -only products (p) alone,
// -only owners (i) and (o) alone, -only redis (b) and (r) alone (redis-server from Debian's
// redis-server package), -only ws (w) and (w0) alone, -only cache (t) alone, -only ratelimit (b) and
// (l) alone, -only bump (k) alone, -only idle (z1) and (z2) alone.
//
// Every server runs as a child process on free 127.0.0.1 ports, built from this module
// (web3gate with `go build .`, bench/bare), anvil from `npm ci --prefix e2e`; the load is
// wrk (`apt-get install wrk`). With -pin (the default on 2 CPUs or more) wrk runs on CPU 0 and
// the servers on the others, so that the load generator never takes the servers' CPU and the
// rate ratios are ratios of the servers' capacities; -pin=false lets them share every CPU,
// which pulls every ratio towards 1 by wrk's own cost per request.
//
// Other processes on the machine make the rates noisy: the rounds run in alternating order,
// the summary takes medians, and it also gives the ratios of the servers' CPU time per
// request, which depend little on how much CPU the servers got. With -pin the latencies at
// concurrency 1 are measured a second time with wrk on the servers' CPUs, for reference: at
// concurrency 1 nothing runs at once, and that placement leaves out the VM's wake-ups across
// CPUs.
//
// Run it from the module root: go run ./bench [-duration 4s] [-rounds 3] [-only signing]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// anvilRel is the anvil binary inside the module, as `npm ci --prefix e2e` installs it.
const anvilRel = "e2e/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"

// options are the command line.
type options struct {
	duration, warmup, latDuration time.Duration
	sendDuration                  time.Duration
	rounds, threads, conns        int
	pin, forwarder                bool
	src                           string
	only                          string   // "", "proxy", "signing", "products", "owners", "redis", "ws", "cache", "ratelimit", "bump" or "idle"
	signTargets                   []string // the signing measurements to run; none: all
	postgres                      string   // admin connection string of (f2) and (g2)'s PostgreSQL
	ws                            wsOptions
}

func main() {
	code := 0
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		code = 1
		if errors.Is(err, flag.ErrHelp) {
			code = 2
		}
	}
	os.Exit(code)
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 4*time.Second, "measured load per target and round (whole seconds)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measured run (whole seconds, 0 for none)")
	fs.DurationVar(&o.latDuration, "lat-duration", 2*time.Second, "measured load at concurrency 1 for the p50 latency of (c) and (d)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds over the targets, order alternating; the summary takes the median")
	fs.IntVar(&o.threads, "threads", 1, "wrk threads")
	fs.IntVar(&o.conns, "connections", 32, "wrk connections")
	fs.BoolVar(&o.pin, "pin", runtime.NumCPU() >= 2, "pin wrk to CPU 0 and the servers to the other CPUs (taskset); (f) and (g) leave web3gate every CPU: their targets are rates of the machine")
	fs.BoolVar(&o.forwarder, "forwarder", false, "also measure (e), a plain fasthttp forwarder (bench/bare -upstream) in front of the same anvil, one upstream request per call")
	fs.StringVar(&o.src, "src", "", "web3gate module to build and measure, with its own config.yaml (default: this module); e.g. a patched copy")
	fs.DurationVar(&o.sendDuration, "send-duration", 10*time.Second, "measured load of (g) and (g'), the sustained eth_sendTransaction rate (whole seconds); (f) runs for -duration")
	fs.StringVar(&o.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL of (f2) and (g2): a connection string of an existing database, from which each of their rounds creates a database of its own (CREATE DATABASE) and drops it after")
	signTargets := fs.String("sign-targets", "", `the signing measurements to run, comma separated (of f, g, g', f2, g2, f-pkcs11, f-awskms); empty: all`)
	fs.StringVar(&o.only, "only", "", `"proxy": only (a)-(e); "signing": only (f), (g), (g'), (f2) and (g2), custodial signing; "products": only (p), the product list; "owners": only (i) and (o), the NFT owners index; "redis": only (b) and (r), a read answered by Redis; "ws": only (w) and (w0), WebSocket subscribers; "cache": only (t), a replayed dApp workload with the response cache on and off; "ratelimit": only (b) and (l), the rate-limit stage's cost; "bump": only (k), transactions priced out by a base-fee spike with fee bumping on and off; "idle": only (z1) and (z2), the idle RSS and the binary's size`)
	fs.IntVar(&o.ws.heads, "ws-heads", 10_000, "(w): newHeads subscribers, one socket each")
	fs.IntVar(&o.ws.logs, "ws-logs", 1_000, "(w): logs subscribers, one socket each")
	fs.IntVar(&o.ws.blocks, "ws-blocks", 20, "(w): measured blocks a round")
	fs.IntVar(&o.ws.warmups, "ws-warmup", 2, "(w): unmeasured blocks a round before the measured ones")
	fs.BoolVar(&o.ws.noAnvil, "ws-no-anvil", false, "(w) alone, without (w0), the anvil reference: for quick iterations")
	fs.BoolVar(&o.ws.node, "ws-node", true, "(w): also (wn) and (wp), web3gate in front of an anvil node, polling it and pushed by it (delivery timed from the node's announcement)")
	fs.BoolVar(&o.ws.nodeOnly, "ws-node-only", false, "(w): only (wn), (wp) and (w0), without (w): for quick iterations")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{{"duration", o.duration, time.Second}, {"warmup", o.warmup, 0}, {"lat-duration", o.latDuration, time.Second},
		{"send-duration", o.sendDuration, time.Second}} {
		if d.v < d.min || d.v%time.Second != 0 {
			return o, fmt.Errorf("-%s %v: must be whole seconds, at least %v (wrk counts seconds)", d.name, d.v, d.min)
		}
	}
	if o.rounds < 1 || o.threads < 1 || o.conns < o.threads {
		return o, errors.New("-rounds and -threads must be at least 1, -connections at least -threads")
	}
	if o.only != "" && !slices.Contains([]string{"proxy", "signing", "products", "owners", "redis", "ws", "cache", "ratelimit", "bump", "idle"}, o.only) {
		return o, fmt.Errorf(`-only %q: must be "proxy", "signing", "products", "owners", "redis", "ws", "cache", "ratelimit", "bump" or "idle"`, o.only)
	}
	if o.ws.heads < 0 || o.ws.logs < 0 || o.ws.heads+o.ws.logs < 1 || o.ws.blocks < 1 || o.ws.warmups < 0 {
		return o, errors.New("-ws-heads and -ws-logs must be at least 0 and not both 0, -ws-blocks at least 1, -ws-warmup at least 0")
	}
	if *signTargets != "" {
		for _, k := range strings.Split(*signTargets, ",") {
			if !slices.Contains(signKeys, k) {
				return o, fmt.Errorf("-sign-targets: %q is not one of %s", k, strings.Join(signKeys, ", "))
			}
			o.signTargets = append(o.signTargets, k)
		}
	}
	if o.forwarder && o.only != "" && o.only != "proxy" {
		return o, fmt.Errorf("-forwarder is a proxy target: it does not go with -only %s", o.only)
	}
	return o, nil
}

func run(args []string) (err error) {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	wrk, wrkVersion, err := findWrk()
	if err != nil && o.only != "cache" && o.only != "bump" && o.only != "idle" { // (t) and (k) load with their own clients, (z) loads nothing
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	anvilBin := filepath.Join(root, filepath.FromSlash(anvilRel))
	if fi, err := os.Stat(anvilBin); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("anvil is not installed at %s; install it from %s with: npm ci --prefix e2e", anvilBin, root)
	}
	src := root
	if o.src != "" {
		if src, err = filepath.Abs(o.src); err != nil {
			return err
		}
	}
	var serverCPUs, loadCPUs string
	var serverCPUList []int
	if o.pin {
		if _, err := exec.LookPath("taskset"); err != nil {
			return fmt.Errorf("-pin needs taskset (util-linux): %w; or run with -pin=false", err)
		}
		n := runtime.NumCPU()
		if n < 2 {
			return fmt.Errorf("-pin needs at least 2 CPUs, this machine has %d; run with -pin=false", n)
		}
		loadCPUs, serverCPUs = "0", "1"
		if n > 2 {
			serverCPUs = fmt.Sprintf("1-%d", n-1)
		}
		for i := 1; i < n; i++ {
			serverCPUList = append(serverCPUList, i)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the bench at once; the kernel then kills the children
	}()

	tmp, err := os.MkdirTemp("", "web3gate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	cs := &children{}
	defer func() {
		_, cerr := cs.stopAll()
		if cerr != nil {
			err = errors.Join(err, cerr)
			return
		}
		fmt.Printf("cleanup: %d server processes stopped, none left running\n", cs.stopped)
	}()

	info := collectInfo(root, src, wrkVersion, anvilBin)
	web3gateBin, bareBin := filepath.Join(tmp, "web3gate"), filepath.Join(tmp, "bare")
	if o.only != "" && o.only != "proxy" {
		fmt.Printf("building web3gate (%s)...\n", src)
	} else {
		fmt.Printf("building web3gate (%s) and bench/bare...\n", src)
	}
	if err := goBuild(ctx, src, ".", web3gateBin); err != nil {
		return err
	}
	if o.only == "" || o.only == "proxy" {
		if err := goBuild(ctx, root, "./bench/bare", bareBin); err != nil {
			return err
		}
	}
	if (o.only == "" || o.only == "ws") && (o.ws.node || o.ws.nodeOnly) {
		o.ws.floorBin = filepath.Join(tmp, "wsfloor")
		if err := goBuild(ctx, root, "./bench/wsfloor", o.ws.floorBin); err != nil {
			return err
		}
	}

	cfg := runConfig{
		wrk: wrk, loadCPUs: loadCPUs, serverCPUs: serverCPUs, serverCPUList: serverCPUList, rounds: o.rounds, warmup: o.warmup,
		load:    load{threads: o.threads, conns: o.conns, duration: o.duration},
		latency: load{threads: 1, conns: 1, duration: o.latDuration},
	}
	var targets []*target
	var rounds []round
	if o.only == "" || o.only == "proxy" {
		fmt.Println("starting servers...")
		if targets, err = startTargets(ctx, cs, serverCPUs, src, tmp, web3gateBin, bareBin, anvilBin, o.forwarder); err != nil {
			return err
		}
		if err := check(targets); err != nil {
			return err
		}
		for _, t := range targets {
			if t.script, err = writeScript(tmp, t); err != nil {
				return err
			}
		}
		if rounds, err = measureAll(ctx, cs, cfg, targets); err != nil {
			return err
		}
		// The signing measurements start their own servers: these would only take CPU.
		if _, err := cs.stopAll(); err != nil {
			return err
		}
	}
	var specs []*signSpec
	var signRounds []signRound
	if o.only == "" || o.only == "signing" {
		fmt.Println("signing: a fresh web3gate for each measurement and round...")
		specs = signSpecs(o)
		for _, sp := range specs {
			if sp.t.script, err = writeScript(tmp, sp.t); err != nil {
				return err
			}
		}
		if signRounds, err = measureSigning(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin, postgres: o.postgres}, specs); err != nil {
			return err
		}
	}
	var prods *productsRun
	if o.only == "" || o.only == "products" {
		if prods, err = measureProducts(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin}); err != nil {
			return err
		}
	}
	var owns *ownersRun
	if o.only == "" || o.only == "owners" {
		if owns, err = measureOwners(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin}, anvilBin); err != nil {
			return err
		}
	}
	var shared *redisRun
	if o.only == "" || o.only == "redis" {
		shared, err = measureRedis(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin}, anvilBin)
		if err != nil {
			return err
		}
		if _, err := cs.stopAll(); err != nil {
			return err
		}
	}
	var cached *cacheRun
	if o.only == "" || o.only == "cache" {
		cached, err = measureCache(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin}, anvilBin)
		if err != nil {
			return err
		}
		if _, err := cs.stopAll(); err != nil {
			return err
		}
	}
	var rt *wsRun
	if o.only == "" || o.only == "ws" {
		if rt, err = measureWS(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin}, anvilBin, o.ws); err != nil {
			return err
		}
	}
	var limits *rateLimitRun
	if o.only == "" || o.only == "ratelimit" {
		limits, err = measureRateLimit(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin})
		if err != nil {
			return err
		}
		if _, err := cs.stopAll(); err != nil {
			return err
		}
	}
	var bumped *bumpRun
	if o.only == "" || o.only == "bump" {
		bumped, err = measureBump(ctx, cs, cfg, signEnv{root: root, tmp: tmp, bin: web3gateBin}, anvilBin)
		if err != nil {
			return err
		}
		if _, err := cs.stopAll(); err != nil {
			return err
		}
	}
	var idle *idleRun
	if o.only == "" || o.only == "idle" {
		idle, err = measureIdle(ctx, cs, cfg, signEnv{root: src, tmp: tmp, bin: web3gateBin}, anvilBin)
		if err != nil {
			return err
		}
		if _, err := cs.stopAll(); err != nil {
			return err
		}
	}
	report(os.Stdout, info, cfg, targets, rounds, specs, signRounds)
	reportProducts(os.Stdout, cfg, prods)
	reportOwners(os.Stdout, cfg, owns)
	shared.report(os.Stdout, cfg)
	reportWS(os.Stdout, cfg, rt)
	reportCache(os.Stdout, cfg, cached)
	limits.report(os.Stdout, cfg)
	bumped.report(os.Stdout, cfg)
	idle.report(os.Stdout, cfg)
	var bad []string
	for _, b := range []string{failures(rounds), signFailures(signRounds), productsFailures(prods), ownersFailures(owns), shared.failures(), wsFailures(rt), cacheFailures(cached), limits.failures(), bumped.failures()} {
		if b != "" {
			bad = append(bad, b)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the load got errors, so the rates above are not valid:\n%s", strings.Join(bad, "\n"))
	}
	return nil
}

// startTargets starts the servers of every target, each ready to answer, on cpus.
func startTargets(ctx context.Context, cs *children, cpus, root, tmp, web3gateBin, bareBin, anvilBin string, forwarder bool) ([]*target, error) {
	cred, err := newCredentials()
	if err != nil {
		return nil, err
	}
	// Every target gets the same request bytes but for the path: the headers that web3gate
	// reads go to the baselines too, so that parsing them is no part of the ratios.
	a := &target{key: "a", name: "bare fasthttp", body: chainIDBody, headers: devHeaders}
	b := &target{key: "b", name: "web3gate eth_chainId", body: chainIDBody, headers: devHeaders}
	c := &target{key: "c", name: "anvil eth_getBalance", body: balanceBody, headers: cred.headers()}
	d := &target{key: "d", name: "web3gate → anvil", body: balanceBody, headers: cred.headers()}
	targets := []*target{a, b, c, d}
	if err := startBare(ctx, cs, cpus, bareBin, a, ""); err != nil {
		return nil, err
	}
	if err := startAnvil(ctx, cs, cpus, anvilBin, c); err != nil {
		return nil, err
	}
	wb, api, admin, err := startWeb3gate(ctx, cs, cpus, web3gateBin, "web3gate (dev chain)", devConfig(root, tmp))
	if err != nil {
		return nil, err
	}
	b.url, b.admin, b.servers = api+"/v1/web3/mainnet", admin, []*child{wb}
	wd, api, admin, err := startWeb3gate(ctx, cs, cpus, web3gateBin, "web3gate (anvil)", forwardConfig(tmp, c.url, cred))
	if err != nil {
		return nil, err
	}
	d.url, d.admin, d.servers = api+"/v1/web3/mainnet", admin, []*child{wd, c.servers[0]}
	h, err := tokenTarget(ctx, b)
	if err != nil {
		return nil, err
	}
	targets = append(targets, h)
	if forwarder {
		e := &target{key: "e", name: "bare forwarder → anvil", body: balanceBody, headers: cred.headers()}
		if err := startBare(ctx, cs, cpus, bareBin, e, c.url); err != nil {
			return nil, err
		}
		e.servers = append(e.servers, c.servers[0])
		targets = append(targets, e)
	}
	return targets, nil
}

// check sends one request to each target and verifies the answer, before any load: a load
// of error answers would measure the error path.
func check(ts []*target) error {
	results := map[string]string{}
	for _, t := range ts {
		if t.method == http.MethodGet {
			continue // (h) was checked when its token was made
		}
		res, err := rpcResult(t)
		if err != nil {
			return fmt.Errorf("check (%s) %s at %s: %w", t.key, t.name, t.url, err)
		}
		results[t.key] = string(res)
	}
	if want := `"0x539"`; results["a"] != want || results["b"] != want {
		return fmt.Errorf("check: eth_chainId answered %s by (a) and %s by (b), want %s", results["a"], results["b"], want)
	}
	if !strings.HasPrefix(results["c"], `"0x`) || results["c"] == `"0x0"` {
		return fmt.Errorf("check: anvil's balance of %s is %s, want the funded dev account's", balanceOf, results["c"])
	}
	for _, k := range []string{"d", "e"} {
		if r, ok := results[k]; ok && r != results["c"] {
			return fmt.Errorf("check: (%s) answered eth_getBalance with %s, anvil with %s", k, r, results["c"])
		}
	}
	return nil
}

// moduleRoot walks up from the working directory to web3gate's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if raw, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if !strings.Contains(string(raw), "module github.com/web3gate/web3gate\n") {
				return "", fmt.Errorf("%s/go.mod is not web3gate's; run the bench from inside the web3gate module", d)
			}
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or above; run the bench from inside the web3gate module", dir)
		}
	}
}
