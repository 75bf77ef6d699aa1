//go:build linux

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// runConfig is how every target is loaded.
type runConfig struct {
	wrk      string
	loadCPUs string // wrk's CPUs with -pin, else ""
	// serverCPUs are the servers' CPUs with -pin as taskset has them, else "";
	// serverCPUList the same as numbers.
	serverCPUs    string
	serverCPUList []int
	rounds        int
	warmup        time.Duration
	load          load // the throughput load, the same for every target
	latency       load // the concurrency-1 load of the p50 latencies of (c), (d) and (e)
}

// sample is one measured run of wrk against a target.
type sample struct {
	wrk  wrkResult
	warm wrkResult // the warm-up run before it, for its errors
	// serverCPU is the CPU time of the target's server processes during the run, and
	// perServer the same for each of them, in the order of target.servers.
	serverCPU time.Duration
	perServer []time.Duration
	// busy is the CPU time the whole machine spent busy during the run; serverIdle the
	// time the servers' CPUs (every CPU without -pin) spent idle, and serverCPUs how many
	// CPUs that is.
	busy       time.Duration
	serverIdle time.Duration
	serverCPUs int
	// calls are web3gate's counters over the warm-up and the run (web3gate targets only).
	calls *counters
	// pgCPU is the CPU time of the PostgreSQL backends serving the target's database during
	// the run ((f2), (g2)); 0 on SQLite.
	pgCPU time.Duration
}

// otherCPU is the CPU time of everything but the target's servers, their PostgreSQL
// backends and wrk during the run: other processes of the machine, which make the run noisy.
func (s sample) otherCPU() time.Duration { return max(s.busy-s.serverCPU-s.pgCPU-s.wrk.CPU, 0) }

// pgPerRequest is the PostgreSQL backends' CPU time per completed request.
func (s sample) pgPerRequest() time.Duration {
	if s.wrk.Requests == 0 {
		return 0
	}
	return s.pgCPU / time.Duration(s.wrk.Requests)
}

// cores turns a CPU time during the run into CPUs used on average.
func (s sample) cores(d time.Duration) float64 { return d.Seconds() / s.wrk.Duration.Seconds() }

// idleShare is the share of the servers' CPUs left idle during the run: near 0 when the
// load saturated them.
func (s sample) idleShare() float64 {
	return s.cores(s.serverIdle) / float64(max(s.serverCPUs, 1))
}

// cpuPerRequest is the servers' CPU time per completed request.
func (s sample) cpuPerRequest() time.Duration {
	if s.wrk.Requests == 0 {
		return 0
	}
	return s.serverCPU / time.Duration(s.wrk.Requests)
}

// problems spells out what went wrong in the run: wrk's errors, and web3gate's answers that
// were not results. "" when nothing did.
func (s sample) problems() string {
	var parts []string
	if e := s.warm.ErrorText(); e != "" {
		parts = append(parts, "warm-up: "+e)
	}
	if e := s.wrk.ErrorText(); e != "" {
		parts = append(parts, e)
	}
	if s.calls != nil {
		if f := s.calls.failures(); f != "" {
			parts = append(parts, "web3gate /metrics: "+f)
		}
		if ok, n := s.calls.calls["ok"]+s.calls.rest["200"], s.warm.Requests+s.wrk.Requests; ok < float64(n) {
			parts = append(parts, fmt.Sprintf("web3gate counted %.0f calls answered ok, wrk %d responses", ok, n))
		}
	}
	return strings.Join(parts, "; ")
}

// round holds the samples of one round by target key: the throughput of every target, the
// concurrency-1 latency of the forwarding ones and their upstream, (c), (d) and (e), and with
// -pin the same latencies again with wrk on the servers' CPUs (lat1).
type round struct {
	tput, lat, lat1 map[string]sample
}

// latencyKeys are the targets whose p50 latency at concurrency 1 is measured.
var latencyKeys = map[string]bool{"c": true, "d": true, "e": true}

// measureAll runs the rounds: the throughput of every target, then the latencies, the order
// reversed every other round so that a drift of the machine's speed over the run weighs on
// every target alike.
func measureAll(ctx context.Context, cs *children, cfg runConfig, ts []*target) ([]round, error) {
	var lts []*target
	for _, t := range ts {
		if latencyKeys[t.key] {
			lts = append(lts, t)
		}
	}
	var rounds []round
	for r := range cfg.rounds {
		rd := round{tput: map[string]sample{}, lat: map[string]sample{}, lat1: map[string]sample{}}
		// run loads each of targets with l, in this round's order, wrk pinned as c says.
		run := func(c runConfig, targets []*target, l load, into map[string]sample, what func(sample) string) error {
			for _, i := range order(len(targets), r) {
				s, err := measure(ctx, cs, c, targets[i], l)
				if err != nil {
					return err
				}
				into[targets[i].key] = s
				progress(r, cfg, targets[i], s, what(s))
			}
			return nil
		}
		if err := run(cfg, ts, cfg.load, rd.tput, func(s sample) string { return fmt.Sprintf("%9.0f req/s", s.wrk.Rate()) }); err != nil {
			return rounds, err
		}
		if err := run(cfg, lts, cfg.latency, rd.lat, func(s sample) string { return fmt.Sprintf("p50 %5.0f µs at c=1", us(s.wrk.P50)) }); err != nil {
			return rounds, err
		}
		// At concurrency 1 nothing runs at once, so wrk can share the servers' CPUs without
		// taking their CPU time; what it saves is the wake-ups across CPUs.
		if cfg.loadCPUs != "" {
			shared := cfg
			shared.loadCPUs = cfg.serverCPUs
			if err := run(shared, lts, cfg.latency, rd.lat1, func(s sample) string {
				return fmt.Sprintf("p50 %5.0f µs at c=1, wrk on the servers' CPUs", us(s.wrk.P50))
			}); err != nil {
				return rounds, err
			}
		}
		rounds = append(rounds, rd)
	}
	return rounds, nil
}

func progress(r int, cfg runConfig, t *target, s sample, what string) {
	line := fmt.Sprintf("round %d/%d  (%s) %-22s %s   servers %.2f CPU, %5.1f µs CPU/req, their CPUs %3.0f%% idle; wrk %.2f CPU; other processes %.2f CPU",
		r+1, cfg.rounds, t.key, t.name, what, s.cores(s.serverCPU), us(s.cpuPerRequest()), 100*s.idleShare(),
		s.cores(s.wrk.CPU), s.cores(s.otherCPU()))
	if p := s.problems(); p != "" {
		line += "\n    !!! ERRORS: " + p
	}
	fmt.Println(line)
}

// order is 0..n-1, reversed in odd rounds.
func order(n, round int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	if round%2 == 1 {
		slices.Reverse(o)
	}
	return o
}

// measure warms t up, then runs the measured load and records the servers' CPU and
// web3gate's counters around it.
func measure(ctx context.Context, cs *children, cfg runConfig, t *target, l load) (sample, error) {
	var s sample
	var before counters
	if t.admin != "" {
		var err error
		if before, err = scrape(t.admin); err != nil {
			return s, err
		}
	}
	if cfg.warmup > 0 {
		w := l
		w.duration = cfg.warmup
		var err error
		if s.warm, err = runWrk(ctx, cs, cfg.wrk, cfg.loadCPUs, t, w); err != nil {
			return s, err
		}
	}
	cpu0, ct0, err := snapshot(t)
	if err != nil {
		return s, err
	}
	if s.wrk, err = runWrk(ctx, cs, cfg.wrk, cfg.loadCPUs, t, l); err != nil {
		return s, err
	}
	cpu1, ct1, err := snapshot(t)
	if err != nil {
		return s, err
	}
	s.addCPU(cfg, cpu0, ct0, cpu1, ct1)
	if t.admin != "" {
		after, err := scrape(t.admin)
		if err != nil {
			return s, err
		}
		d := after.sub(before)
		s.calls = &d
	}
	return s, nil
}

// addCPU records the CPU used between two snapshots: the machine's, the idle time of the
// servers' CPUs, and each server's.
func (s *sample) addCPU(cfg runConfig, cpu0 []time.Duration, ct0 cpuTimes, cpu1 []time.Duration, ct1 cpuTimes) {
	s.busy = ct1["cpu"].busy - ct0["cpu"].busy
	s.serverIdle = ct1.idle(cfg.serverCPUList) - ct0.idle(cfg.serverCPUList)
	s.serverCPUs = len(cfg.serverCPUList)
	if s.serverCPUs == 0 {
		s.serverCPUs = len(ct1) - 1
	}
	for i := range cpu1 {
		s.perServer = append(s.perServer, cpu1[i]-cpu0[i])
		s.serverCPU += cpu1[i] - cpu0[i]
	}
}

// snapshot reads the CPU time of each of t's servers and of the machine.
func snapshot(t *target) (servers []time.Duration, ct cpuTimes, err error) {
	for _, c := range t.servers {
		if c.exited() {
			return nil, nil, fmt.Errorf("%s exited during the load: %v\n%s", c.name, c.err, indent(c.out.String()))
		}
		d, err := cpuTime(c.cmd.Process.Pid)
		if err != nil {
			return nil, nil, fmt.Errorf("CPU time of %s: %w", c.name, err)
		}
		servers = append(servers, d)
	}
	ct, err = readCPUTimes()
	return servers, ct, err
}

// failures lists the runs that got errors, "" when none did.
func failures(rounds []round) string {
	var lines []string
	for i, rd := range rounds {
		for _, kind := range []struct {
			name    string
			samples map[string]sample
		}{{"throughput", rd.tput}, {"latency", rd.lat}, {"latency, wrk on the servers' CPUs", rd.lat1}} {
			for _, k := range slices.Sorted(maps.Keys(kind.samples)) {
				if p := kind.samples[k].problems(); p != "" {
					lines = append(lines, fmt.Sprintf("  round %d, (%s) %s: %s", i+1, k, kind.name, p))
				}
			}
		}
	}
	return strings.Join(lines, "\n")
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
