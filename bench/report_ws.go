//go:build linux

// (w)'s progress lines, its report against the targets, and its failures.

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// wsProgress prints one server's figures of a round.
func wsProgress(r int, cfg runConfig, k string, s *wsSample, o wsOptions) {
	name := map[string]string{"w": "web3gate", "w0": "anvil", "wn": "web3gate polling anvil", "wp": "web3gate pushed by anvil", "wf": "the write floor (bench/wsfloor)"}[k]
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	line := fmt.Sprintf("round %d/%d  (%s) %-8s %d sockets in %v; RSS %+.1f MiB, %.1f KiB/socket; delivery p50 %s ms, p99 %s ms (newHeads %s, logs %s); spread p99 %s ms; from the send p50 %s ms; %s ms server CPU/block + %s ms interrupts (%.2f CPU during the blocks; other processes %.2f CPU)",
		r+1, cfg.rounds, k, name, o.sockets(), s.connect.Round(100*time.Millisecond), float64(s.rssAfter-s.rssBefore)/(1<<20),
		s.rssPerSocket(o.sockets())/1024, ms(quantile(s.all, 0.5)), ms(quantile(s.all, 0.99)), ms(quantile(s.heads, 0.99)),
		ms(quantile(s.logs, 0.99)), ms(quantile(s.spread, 0.99)), ms(quantile(s.fromSend, 0.5)), ms(s.cpuPerBlock),
		ms(s.irqPerBlock), s.serverCores, s.otherCores)
	if s.hasFeedCalls {
		line += fmt.Sprintf("; feed upstream calls/block %.2f", s.feedCallsPerBlock)
	}
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
			if s.hasFeedCalls {
				add("calls "+k, s.feedCallsPerBlock)
			}
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
	reportWSNode(w, series)
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
		for _, k := range []string{"w0", "w", "wn", "wp", "wf"} {
			if s := rd[k]; s != nil && len(s.problems) > 0 {
				lines = append(lines, fmt.Sprintf("  round %d, (%s): %s", i+1, k, strings.Join(s.problems, "; ")))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// The targets of (wp), web3gate pushed by the node.
const (
	// targetWSPushVsNode: (wp)'s delivery p99 at most this share of (w0)'s, anvil serving the
	// same subscribers itself (at least 5x faster).
	targetWSPushVsNode = 0.20
	// targetWSPushCalls: the feed's upstream calls per block with the push up.
	targetWSPushCalls = 1.0
	// targetWSPushVsFloor: (wp)'s delivery p99 at most this multiple of (wf)'s, the writes
	// alone.
	targetWSPushVsFloor = 1.3
)

// reportWSNode prints (wn) and (wp), web3gate fed by anvil, timed from the node's
// announcement of each block, against (w0) and the targets; nothing without them.
func reportWSNode(w io.Writer, series map[string][]float64) {
	if len(series["p99 wn"]) == 0 && len(series["p99 wp"]) == 0 {
		return
	}
	fmt.Fprintln(w, "\nws (wn) web3gate polling an anvil node, (wp) web3gate pushed by it (its ws:// URL in upstreams.chains[].wsUrls); delivery from the node's announcement of the block (the kernel's receive time of its newHeads notification on the bench's own socket on the node), (w0) from the send")
	val := func(k, format string) string {
		xs := series[k]
		if len(xs) == 0 {
			return "—"
		}
		return fmt.Sprintf(format+" (%s)", median(xs), fmt.Sprintf(format+"–"+format, slices.Min(xs), slices.Max(xs)))
	}
	ratio := func(a, b string) string {
		if len(series[a]) == 0 || len(series[b]) == 0 || median(series[b]) == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", median(series[a])/median(series[b]))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "(wf) the write floor: bench/wsfloor writing each block's frames (prebuilt bytes) to the same subscribers, one write per socket, timed from the bench's trigger")
	fmt.Fprintln(tw, "measure (median of the rounds)\t(wn) poll\t(wp) push\t(wf) floor\t(w0) anvil\twp/wn\twp/wf\twp/w0\ttarget\tresult\t")
	row := func(name, k, format, target string, pass func() bool) {
		res := ""
		if target != "" {
			res = verdict(pass())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, val(k+" wn", format), val(k+" wp", format), val(k+" wf", format),
			val(k+" w0", format), ratio(k+" wp", k+" wn"), ratio(k+" wp", k+" wf"), ratio(k+" wp", k+" w0"), target, res)
	}
	has := func(k string) bool { return len(series[k]) > 0 }
	row("delivery p50, every subscriber (ms)", "p50", "%.1f", "", nil)
	row("delivery p99, every subscriber (ms)", "p99", "%.1f", fmt.Sprintf("wp/w0 ≤ %.2f", targetWSPushVsNode),
		func() bool {
			return has("p99 wp") && has("p99 w0") && median(series["p99 wp"]) <= targetWSPushVsNode*median(series["p99 w0"])
		})
	row("delivery p99 against the floor", "p99", "%.1f", fmt.Sprintf("wp/wf ≤ %.1f", targetWSPushVsFloor),
		func() bool {
			return has("p99 wp") && has("p99 wf") && median(series["p99 wp"]) <= targetWSPushVsFloor*median(series["p99 wf"])
		})
	row("delivery max (ms)", "max", "%.1f", "", nil)
	row("delivery p99, newHeads (ms)", "heads p99", "%.1f", "", nil)
	row("delivery p99, logs (ms)", "logs p99", "%.1f", "", nil)
	row("spread p99 (ms)", "spread p99", "%.1f", "", nil)
	row("from the send p99 (ms)", "send p99", "%.1f", "", nil)
	row("server CPU per block (ms; web3gate, not the node)", "cpu", "%.1f", "", nil)
	row("feed upstream calls per block", "calls", "%.2f", fmt.Sprintf("wp ≤ %.0f", targetWSPushCalls),
		func() bool { return has("calls wp") && median(series["calls wp"]) <= targetWSPushCalls })
	tw.Flush()
}
