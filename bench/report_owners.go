//go:build linux

// The owners measurements' report against the targets, and their failures.

package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// reportOwners prints (i) and (o) against their targets.
func reportOwners(w io.Writer, cfg runConfig, or *ownersRun) {
	if or == nil || len(or.ingest) == 0 {
		return
	}
	fmt.Fprintf(w, "\nowners (i): a fresh web3gate indexing %d NFT transfers (%d logs) in %d anvil blocks (generated in %v), eth_getLogs over %d blocks; web3gate and anvil on every CPU; %d rounds\n",
		ownersTransfers, ownersLogs, or.blocks, or.genTime.Round(100*time.Millisecond), ownersBlockRange, len(or.ingest))
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	for _, s := range or.ingest {
		add("rate", s.rate())
		add("wall", s.wallRate())
		add("write", s.writeRate())
		add("fetch", s.fetchRate())
		add("cpu", us(s.web3gateCPU)/s.logs)
		add("anvil", us(s.anvilC)/s.logs)
	}
	med := func(k string) float64 { return median(series[k]) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ingest (median of the rounds)\tlogs/s\trange\t")
	fmt.Fprintf(tw, "whole pipeline (first range written to caught up)\t%.0f\t%.0f–%.0f\t\n", med("rate"), slices.Min(series["rate"]), slices.Max(series["rate"]))
	fmt.Fprintf(tw, "whole pipeline, from the process start\t%.0f\t%.0f–%.0f\t\n", med("wall"), slices.Min(series["wall"]), slices.Max(series["wall"]))
	fmt.Fprintf(tw, "store writes alone (sum of write_duration)\t%.0f\t%.0f–%.0f\t\n", med("write"), slices.Min(series["write"]), slices.Max(series["write"]))
	fmt.Fprintf(tw, "fetches alone (eth_getLogs + headers + parse; anvil's time included)\t%.0f\t%.0f–%.0f\t\n", med("fetch"), slices.Min(series["fetch"]), slices.Max(series["fetch"]))
	tw.Flush()
	fmt.Fprintf(w, "CPU per log: web3gate %.1f µs, anvil %.1f µs\n", med("cpu"), med("anvil"))

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\ttarget\tresult\t")
	fmt.Fprintf(tw, "owners ingest, whole pipeline\t%.0f logs/s\t≥ %.0f logs/s\t%s\t\n", med("rate"), targetIngestRate, verdict(med("rate") >= targetIngestRate))
	tw.Flush()
	if len(or.get.rounds) > 0 {
		fmt.Fprintf(w, "\nowners (o): GET /v1/owners over that index (%d transfers); latency load %s, throughput load %s, each after a %v warm-up; %d rounds\n",
			ownersTransfers, cfg.latency, cfg.load, cfg.warmup, len(or.get.rounds))
		or.get.report(w, cfg, "query", targetOwnersP99)
	}
	if bad := ownersFailures(or); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE LOAD GOT ERRORS: these figures count failed requests and are not valid !!!!!\n%s\n", bad)
	}
}

// ownersFailures lists the runs of (o) that got errors, "" when none did.
func ownersFailures(or *ownersRun) string {
	if or == nil {
		return ""
	}
	return or.get.failures()
}
