//go:build linux

// (k)'s report (bumping on against off), its failures, and the texts of its figures.

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// statesText is a count of records by state, in a fixed order.
func statesText(states map[string]int) string {
	keys := slices.Sorted(maps.Keys(states))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, states[k])
	}
	return strings.Join(parts, ", ")
}

func secsOrNone(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// report prints the runs and the medians.
func (br *bumpRun) report(w io.Writer, cfg runConfig) {
	if br == nil || len(br.rounds) == 0 {
		return
	}
	first := br.rounds[0]["on"]
	fmt.Fprintf(w, "\n===== fee bumping: (k) %d transactions priced out by a base-fee spike, bumping on against off =====\n", bumpSends)
	fmt.Fprintf(w, "%d accounts × %d eth_sendTransaction, fees filled by web3gate at a head base fee of %d wei (highest fee cap %s wei);\n", bumpAccounts, bumpPerAccount, bumpBaseFee, first.feeCap)
	fmt.Fprintf(w, "then a block every %v at %d × that fee cap (%s wei) for at most %v; bumping at its defaults (after 3 blocks, +12.5 %%); a new anvil and web3gate each run\n", bumpBlockEvery, bumpSpike, first.spike, bumpWindow)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\ton: mined\ton: first mined\ton: all mined\ton: blocks\ton: bumps\ton: first bump\ton: all bumped\ton: versions\toff: mined in 60 s\toff: nonces filled\toff: records\t")
	var all, within, off, spread []float64
	allDone := true
	for i, rd := range br.rounds {
		on, of := rd["on"], rd["off"]
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%.0f\t%s\t%s\t%d\t%d\t%d\t%s\t\n", i+1, on.within, secsOrNone(on.firstMined), secsOrNone(on.allMined), on.blocks, on.bumps,
			secsOrNone(on.firstBump), secsOrNone(on.allBumped), on.records.versions, of.within, of.others, statesText(of.records.states))
		if on.allBumped > 0 && on.firstBump > 0 {
			spread = append(spread, (on.allBumped - on.firstBump).Seconds())
		}
		if on.allMined == 0 {
			allDone = false
		} else {
			all = append(all, on.allMined.Seconds())
		}
		within = append(within, float64(on.within))
		off = append(off, float64(of.within))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\tresult\t")
	if len(all) > 0 {
		fmt.Fprintf(tw, "(k) bumping on: all %d mined after the spike's first block\t%.1f s\t%.1f–%.1f s\t%s\t\n", bumpSends, median(all), slices.Min(all), slices.Max(all), verdict(allDone))
	}
	if len(spread) > 0 {
		fmt.Fprintf(tw, "(k) bumping on: first to %dth bump\t%.2f s\t%.2f–%.2f s\t\t\n", bumpSends, median(spread), slices.Min(spread), slices.Max(spread))
	}
	fmt.Fprintf(tw, "(k) bumping on: mined within %v\t%.0f of %d\t%.0f–%.0f\t\t\n", bumpWindow, median(within), bumpSends, slices.Min(within), slices.Max(within))
	fmt.Fprintf(tw, "(k) bumping off: mined within %v\t%.0f of %d\t%.0f–%.0f\t\t\n", bumpWindow, median(off), bumpSends, slices.Min(off), slices.Max(off))
	tw.Flush()
	if bad := br.failures(); bad != "" {
		fmt.Fprintf(w, "\n!!!!! (k) GOT ERRORS: these figures are not valid !!!!!\n%s\n", bad)
	}
}

// failures lists what went wrong in the runs, "" when nothing did.
func (br *bumpRun) failures() string {
	if br == nil {
		return ""
	}
	return strings.Join(br.problems, "\n")
}
