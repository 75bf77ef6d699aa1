//go:build linux

// (z) the idle footprint: the resident memory of a web3gate that serves nothing, and the size
// of its binary.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// idleSettle is how long a started web3gate is left alone before its memory is read: the
// start-up work (migrations, first head polls, the pools' first connections) is over by then.
const idleSettle = 5 * time.Second

// idleTargetMiB is the goal for the idle RSS of the gateway configuration (z1).
const idleTargetMiB = 40

// idleSample is one reading of an idle web3gate process.
type idleSample struct {
	rss, rssAnon, rssFile int64 // bytes: VmRSS, RssAnon, RssFile of /proc/PID/status
	heapAlloc, heapInuse  int64 // bytes: go_memstats_heap_alloc_bytes, go_memstats_heap_inuse_bytes
	heapHeld              int64 // bytes: heap_sys − heap_released, the heap the process holds from the OS
	goroutines            int64
}

// idleCase is one configuration measured idle, with its rounds.
type idleCase struct {
	key, name string
	bin       string // the binary started, dropped from the page cache before each start (evictFile)
	config    func(dir string) func(api, admin int) (string, error)
	samples   []idleSample
}

// initCost is one package's initialisation in a GODEBUG=inittrace=1 trace.
type initCost struct {
	pkg    string
	clock  float64 // ms
	bytes  int64
	allocs int64
}

// idleRun is (z): the idle cases, the binary sizes and the package initialisation costs.
type idleRun struct {
	cases               []*idleCase
	binSize, releaseBin int64 // bytes: `go build`, and the release build (-trimpath -ldflags "-s -w")
	gatewayBin          int64 // bytes: the release build with -tags nodevchain
	inits               []initCost
	initTotal           initCost // the sum over every package
}

// measureIdle measures (z1), web3gate with the dev chain off forwarding to one anvil node (no
// Redis, SQLite in a temporary directory, everything else at the shipped defaults); (z2), the
// shipped config.yaml (the embedded dev chain on); and (z3), (z1)'s
// config on the release build without the dev chain (-tags nodevchain). Each round starts a
// fresh process.
func measureIdle(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin string) (*idleRun, error) {
	ir := &idleRun{}
	fi, err := os.Stat(env.bin)
	if err != nil {
		return nil, err
	}
	ir.binSize = fi.Size()
	fmt.Println("idle: building the release binary (-trimpath -ldflags \"-s -w\")...")
	release := env.bin + "-release"
	if err := goBuildFlags(ctx, env.root, ".", release, "-trimpath", "-ldflags=-s -w"); err != nil {
		return nil, err
	}
	if fi, err = os.Stat(release); err != nil {
		return nil, err
	}
	ir.releaseBin = fi.Size()
	fmt.Println("idle: building the release binary without the dev chain (-tags nodevchain)...")
	gatewayOnly := env.bin + "-nodevchain"
	if err := goBuildFlags(ctx, env.root, ".", gatewayOnly, "-trimpath", "-ldflags=-s -w", "-tags=nodevchain"); err != nil {
		return nil, err
	}
	if fi, err = os.Stat(gatewayOnly); err != nil {
		return nil, err
	}
	ir.gatewayBin = fi.Size()
	if ir.inits, ir.initTotal, err = initTrace(ctx, env.bin); err != nil {
		return nil, err
	}

	node := &target{key: "anvil-idle", headers: [][2]string{{"Content-Type", "application/json"}}}
	if err := startAnvil(ctx, cs, cfg.serverCPUs, anvilBin, node); err != nil {
		return nil, err
	}
	defer func() { _ = cs.stop(node.servers[0]) }()
	cred, err := newCredentials()
	if err != nil {
		return nil, err
	}
	gatewayConfig := func(dir string) func(api, admin int) (string, error) {
		return anvilGatewayConfig(dir, "web3gate-idle.yaml", "(z1) an idle gateway", node.url, cred, "  enabled: true\n",
			fmt.Sprintf("store:\n  path: %s\nwallet:\n  keys:\n    dir: %s\n", filepath.Join(dir, "web3gate.db"), filepath.Join(dir, "keystore")))
	}
	shippedConfig := func(dir string) func(api, admin int) (string, error) { return signConfig(env.root, dir, nil) }
	ir.cases = []*idleCase{
		{key: "z1", name: "dev chain off, one anvil upstream, no Redis, SQLite", bin: env.bin, config: gatewayConfig},
		{key: "z2", name: "the shipped config.yaml (embedded dev chain)", bin: env.bin, config: shippedConfig},
		{key: "z3", name: "(z1) on the release build -tags nodevchain", bin: gatewayOnly, config: gatewayConfig},
	}
	for r := range cfg.rounds {
		for _, c := range ir.cases {
			dir, err := os.MkdirTemp(env.tmp, "idle-")
			if err != nil {
				return ir, err
			}
			if err := evictFile(c.bin); err != nil {
				return ir, err
			}
			s, err := idleRound(ctx, cs, cfg.serverCPUs, c.bin, c.name, c.config(dir))
			if err != nil {
				return ir, fmt.Errorf("idle (%s): %w", c.key, err)
			}
			if err := os.RemoveAll(dir); err != nil {
				return ir, err
			}
			c.samples = append(c.samples, s)
			fmt.Printf("round %d/%d  (%s) %s: RSS %.1f MiB (anon %.1f, file %.1f), Go heap in use %.1f MiB, held %.1f MiB, %d goroutines\n",
				r+1, cfg.rounds, c.key, c.name, mib(s.rss), mib(s.rssAnon), mib(s.rssFile), mib(s.heapInuse), mib(s.heapHeld), s.goroutines)
		}
	}
	return ir, nil
}

// idleRound starts web3gate with config, waits until it is ready and then idleSettle more, reads
// its memory and stops it.
func idleRound(ctx context.Context, cs *children, cpus, bin, name string, config func(api, admin int) (string, error)) (idleSample, error) {
	var s idleSample
	c, _, admin, err := startWeb3gate(ctx, cs, cpus, bin, "web3gate ("+name+")", config)
	if err != nil {
		return s, err
	}
	defer func() { _ = cs.stop(c) }()
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(idleSettle):
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"VmRSS:", &s.rss}, {"RssAnon:", &s.rssAnon}, {"RssFile:", &s.rssFile}} {
		if *f.dst, err = statusKiB(raw, f.key); err != nil {
			return s, err
		}
	}
	m, err := metricsWithPrefix(admin, "go_")
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"go_memstats_heap_alloc_bytes", &s.heapAlloc}, {"go_memstats_heap_inuse_bytes", &s.heapInuse}, {"go_goroutines", &s.goroutines}} {
		v, ok := m[f.key]
		if !ok {
			return s, fmt.Errorf("%s/metrics: no %s", admin, f.key)
		}
		*f.dst = int64(v)
	}
	s.heapHeld = int64(m["go_memstats_heap_sys_bytes"] - m["go_memstats_heap_released_bytes"])
	return s, nil
}

// evictFile drops path's pages from the page cache (they are clean: only the file's own
// cache is affected), so that the process started next reads its binary from the disk, as a
// first start after an install does, and every start maps the binary alike. A binary just
// written by the linker sits in the page cache in large folios, which a kernel that has them
// (Linux 6.18 on ext4 here) maps whole: almost every page of the binary then counts in RSS
// (RssFile), however little of it runs (docs/performance.md, "Footprint").
func evictFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// DONTNEED drops clean pages only: the linker's pages are written back first.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("posix_fadvise(%s, DONTNEED): %w", path, err)
	}
	return nil
}

// statusKiB reads the line "key   123 kB" of a /proc/PID/status, in bytes.
func statusKiB(status []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("/proc status: no %s line", key)
}

// goBuildFlags is goBuild with extra build flags.
func goBuildFlags(ctx context.Context, dir, pkg, out string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, indent(string(b)))
	}
	return nil
}

// initTrace runs `bin version` with GODEBUG=inittrace=1 (every package initialises before
// main, whatever the subcommand) and returns the packages' costs, the largest allocations first,
// and their sum.
func initTrace(ctx context.Context, bin string) ([]initCost, initCost, error) {
	cmd := exec.CommandContext(ctx, bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return nil, initCost{}, fmt.Errorf("%s version with GODEBUG=inittrace=1: %w\n%s", bin, err, indent(stderr.String()))
	}
	costs, err := parseInitTrace(stderr.String())
	if err != nil {
		return nil, initCost{}, err
	}
	total := initCost{pkg: fmt.Sprintf("all %d packages with init work", len(costs))}
	for _, c := range costs {
		total.clock += c.clock
		total.bytes += c.bytes
		total.allocs += c.allocs
	}
	slices.SortStableFunc(costs, func(a, b initCost) int { return int(b.bytes - a.bytes) })
	return costs, total, nil
}

// parseInitTrace reads the lines "init PKG @T ms, C ms clock, B bytes, A allocs" of an
// inittrace; other lines are ignored.
func parseInitTrace(trace string) ([]initCost, error) {
	var out []initCost
	for _, line := range strings.Split(trace, "\n") {
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		var c initCost
		var at float64
		if _, err := fmt.Sscanf(line, "init %s @%g ms, %g ms clock, %d bytes, %d allocs", &c.pkg, &at, &c.clock, &c.bytes, &c.allocs); err != nil {
			return nil, fmt.Errorf("inittrace line %q: %w", line, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("inittrace: no init lines (GODEBUG not honoured?)")
	}
	return out, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// report prints (z): the medians of each case, the binary sizes and the largest package inits.
func (ir *idleRun) report(w io.Writer, cfg runConfig) {
	if ir == nil {
		return
	}
	fmt.Fprintf(w, "\nidle footprint (z): each case on a fresh web3gate, read %v after /readyz, %d rounds, medians; the binary dropped from the page cache before each start\n", idleSettle, cfg.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tRSS MiB\tanon MiB\tfile MiB\theap in use MiB\theap held MiB\tgoroutines\t")
	for _, c := range ir.cases {
		med := func(f func(idleSample) int64) float64 {
			xs := make([]float64, len(c.samples))
			for i, s := range c.samples {
				xs[i] = float64(f(s))
			}
			return median(xs)
		}
		fmt.Fprintf(tw, "(%s) %s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t\n", c.key, c.name,
			med(func(s idleSample) int64 { return s.rss })/(1<<20), med(func(s idleSample) int64 { return s.rssAnon })/(1<<20),
			med(func(s idleSample) int64 { return s.rssFile })/(1<<20), med(func(s idleSample) int64 { return s.heapInuse })/(1<<20),
			med(func(s idleSample) int64 { return s.heapHeld })/(1<<20), med(func(s idleSample) int64 { return s.goroutines }))
	}
	tw.Flush()
	if len(ir.cases) > 0 && len(ir.cases[0].samples) > 0 {
		xs := make([]float64, len(ir.cases[0].samples))
		for i, s := range ir.cases[0].samples {
			xs[i] = float64(s.rss)
		}
		verdict := "met"
		if median(xs) > idleTargetMiB<<20 {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "target: (z1) idle RSS ≤ %d MiB: %s\n", idleTargetMiB, verdict)
	}
	fmt.Fprintf(w, "binary: %.1f MiB (go build), %.1f MiB (release: -trimpath -ldflags \"-s -w\"), %.1f MiB (release -tags nodevchain)\n",
		mib(ir.binSize), mib(ir.releaseBin), mib(ir.gatewayBin))
	fmt.Fprintf(w, "package initialisation (GODEBUG=inittrace=1): %s: %.1f ms clock, %.2f MiB in %d allocations; the largest:\n",
		ir.initTotal.pkg, ir.initTotal.clock, mib(ir.initTotal.bytes), ir.initTotal.allocs)
	for _, c := range ir.inits[:min(len(ir.inits), 10)] {
		fmt.Fprintf(w, "  %-60s %7.0f KiB %6d allocs %6.1f ms\n", c.pkg, float64(c.bytes)/1024, c.allocs, c.clock)
	}
}
