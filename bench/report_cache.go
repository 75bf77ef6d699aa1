//go:build linux

// (t)'s report against the targets, and its failures.

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// reportCache prints the rounds and the medians.
func reportCache(w io.Writer, cfg runConfig, run *cacheRun) {
	if run == nil || len(run.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\n===== (t) finality-aware cache: a replayed dApp workload, cache on against off =====\n")
	fmt.Fprintf(w, "%d calls measured after %d unmeasured ones, over %d distinct keys (Zipf s=1.1, two spellings each), %d clients, anvil mining a block every %v; blocks 1..%d final\n",
		cacheTraceCalls-cacheWarmCalls, cacheWarmCalls, cacheKeys, cacheWorkers, cacheBlockEvery, cacheFinalMax)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tlocal share\tupstream/call on\tupstream/call off\tlatest/finalized polls\tp50 on µs\tp50 off µs\tp95 on µs\tp95 off µs\tp99 on µs\tp99 off µs\tp99 on/off\t")
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	for i, rd := range run.rounds {
		on, off := rd["on"], rd["off"]
		local := 1 - float64(on.upstream)/float64(on.calls)
		ratio := float64(on.p99) / float64(off.p99)
		add("local", local)
		add("up on", float64(on.upstream)/float64(on.calls))
		add("up off", float64(off.upstream)/float64(off.calls))
		add("p50 on", us(on.p50))
		add("p50 off", us(off.p50))
		add("p99 on", us(on.p99))
		add("p99 off", us(off.p99))
		add("p99 ratio", ratio)
		add("p95 on", us(on.p95))
		add("p95 off", us(off.p95))
		add("hit n", float64(on.hit.n))
		add("hit p50", us(on.hit.p50))
		add("hit p99", us(on.hit.p99))
		add("miss n", float64(on.miss.n))
		add("miss p50", us(on.miss.p50))
		add("miss p99", us(on.miss.p99))
		add("node p50 on", us(on.node.p50))
		add("node p50 off", us(off.node.p50))
		add("node p99 on", us(on.node.p99))
		add("node p99 off", us(off.node.p99))
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%.3f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t\n", i+1, local,
			float64(on.upstream)/float64(on.calls), float64(off.upstream)/float64(off.calls), on.finality,
			us(on.p50), us(off.p50), us(on.p95), us(off.p95), us(on.p99), us(off.p99), ratio)
	}
	tw.Flush()
	med := func(k string) float64 { return median(series[k]) }
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\ttarget\tresult\t")
	fmt.Fprintf(tw, "calls answered without an upstream call\t%.1f %%\t%.1f–%.1f %%\t≥ %.0f %%\t%s\t\n", 100*med("local"),
		100*slices.Min(series["local"]), 100*slices.Max(series["local"]), 100*targetCacheLocal, verdict(med("local") >= targetCacheLocal))
	fmt.Fprintf(tw, "upstream calls per client call, on / off\t%.3f / %.3f\t\t\t\t\n", med("up on"), med("up off"))
	fmt.Fprintf(tw, "p50, on / off\t%.0f / %.0f µs\t\t\t\t\n", med("p50 on"), med("p50 off"))
	fmt.Fprintf(tw, "p95, on / off\t%.0f / %.0f µs\t\t\t\t\n", med("p95 on"), med("p95 off"))
	fmt.Fprintf(tw, "p99, on / off\t%.0f / %.0f µs\t\t\t\t\n", med("p99 on"), med("p99 off"))
	fmt.Fprintf(tw, "cache on, calls answered locally: p50 / p99\t%.0f / %.0f µs\t%.0f calls\t\t\t\n", med("hit p50"), med("hit p99"), med("hit n"))
	fmt.Fprintf(tw, "cache on, calls that went upstream: p50 / p99\t%.0f / %.0f µs\t%.0f calls\t\t\t\n", med("miss p50"), med("miss p99"), med("miss n"))
	fmt.Fprintf(tw, "anvil's part of an upstream call, on / off: p50\t%.0f / %.0f µs\t\t\t\t\n", med("node p50 on"), med("node p50 off"))
	fmt.Fprintf(tw, "anvil's part of an upstream call, on / off: p99\t%.0f / %.0f µs\t\t\t\t\n", med("node p99 on"), med("node p99 off"))
	fmt.Fprintf(tw, "p99 on/off\t%.3f\t%.3f–%.3f\t≤ %.2f\t%s\t\n", med("p99 ratio"), slices.Min(series["p99 ratio"]),
		slices.Max(series["p99 ratio"]), targetCacheP99, verdict(med("p99 ratio") <= targetCacheP99))
	tw.Flush()
	fmt.Fprintln(w, "note: when more than 1 % of the calls go upstream (the head answers fetched again after each block), the p99 of the cached run is an upstream call's")
	if bad := cacheFailures(run); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE REPLAY GOT ERRORS: these figures are not valid !!!!!\n%s\n", bad)
	}
}

// cacheFailures lists the replays that got errors, "" when none.
func cacheFailures(run *cacheRun) string {
	if run == nil {
		return ""
	}
	return strings.Join(run.problems, "\n")
}
