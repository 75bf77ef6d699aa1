//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets of the measurement.
const (
	targetBA       = 0.85 // throughput of web3gate answering locally, relative to bare fasthttp
	targetDC       = 0.60 // throughput of web3gate in front of anvil, relative to anvil alone
	targetHB       = 0.80 // cached token-metadata GETs, relative to web3gate's own eth_chainId
	targetAddedP50 = 50.0 // µs of p50 latency web3gate adds in front of anvil, at concurrency 1
)

// machineInfo says what the numbers were measured on.
type machineInfo struct {
	start    time.Time
	cpus     string
	kernel   string
	loadavg  string
	goVer    string
	web3gate string
	wrk      string
	anvil    string
}

func collectInfo(root, src, wrkVersion, anvilBin string) machineInfo {
	mi := machineInfo{start: time.Now().UTC(), wrk: wrkVersion}
	model := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mi.cpus = fmt.Sprintf("nproc %d (%s)", runtime.NumCPU(), model)
	mi.kernel = "unknown"
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		mi.kernel = "Linux " + strings.TrimSpace(string(raw))
	}
	mi.loadavg = loadavg()
	mi.goVer = firstLine(exec.Command("go", "version"))
	mi.anvil = strings.TrimPrefix(firstLine(exec.Command(anvilBin, "--version")), "anvil Version: ")
	mi.web3gate = gitDescribe(src)
	if src != root {
		mi.web3gate += " (built from " + src + ")"
	}
	return mi
}

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func firstLine(cmd *exec.Cmd) string {
	out, err := cmd.Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// gitDescribe is the commit of dir and whether its tracked files differ from it. It takes no
// lock on the repository (others may be working in it).
func gitDescribe(dir string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git("rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "commit unknown (not a git checkout)"
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	switch {
	case err != nil:
		return "commit " + commit
	case status != "":
		return "commit " + commit + " + uncommitted changes to tracked files"
	}
	return "commit " + commit
}

// report prints the run's figures: every round, then the medians against the targets; the
// proxy targets (a)-(e) when rounds holds any, the signing ones (f), (g) when signRounds does.
func report(w io.Writer, mi machineInfo, cfg runConfig, ts []*target, rounds []round, specs []*signSpec, signRounds []signRound) {
	pin := "wrk and the servers share every CPU"
	if cfg.loadCPUs != "" {
		pin = fmt.Sprintf("wrk pinned to CPU %s, the servers to CPU %s", cfg.loadCPUs, cfg.serverCPUs)
	}

	fmt.Fprintf(w, "\n===== web3gate bench, %s =====\n", mi.start.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "machine\t%s, %s; load average %s at start, %s at end\n", mi.cpus, mi.kernel, mi.loadavg, loadavg())
	fmt.Fprintf(tw, "go\t%s\n", mi.goVer)
	fmt.Fprintf(tw, "web3gate\t%s\n", mi.web3gate)
	fmt.Fprintf(tw, "wrk\t%s\n", mi.wrk)
	fmt.Fprintf(tw, "anvil\t%s\n", mi.anvil)
	if len(rounds) > 0 {
		orders := make([]string, cfg.rounds)
		for r := range orders {
			for _, i := range order(len(ts), r) {
				orders[r] += ts[i].key
			}
		}
		latTargets := "(c), (d)"
		if _, withE := rounds[0].tput["e"]; withE {
			latTargets += ", (e)"
		}
		fmt.Fprintf(tw, "throughput\t%s after a %v warm-up, each target; %d rounds (orders %s); %s\n",
			cfg.load, cfg.warmup, cfg.rounds, strings.Join(orders, ", "), pin)
		again := ""
		if cfg.loadCPUs != "" {
			again = fmt.Sprintf("; then again with wrk on CPU %s, the servers'", cfg.serverCPUs)
		}
		fmt.Fprintf(tw, "latency\t%s after a %v warm-up, %s; p50 of wrk's histogram%s\n", cfg.latency, cfg.warmup, latTargets, again)
		fmt.Fprintf(tw, "requests\tthe same bytes to every target but for the path, with Content-Type, X-API-Key and Authorization headers; (h) a GET with the same headers\n")
	}
	if len(signRounds) > 0 {
		signHeader(tw, cfg, specs)
	}
	tw.Flush()
	if len(rounds) > 0 {
		reportProxy(w, cfg, ts, rounds)
	}
	if len(signRounds) > 0 {
		reportSigning(w, cfg, specs, signRounds)
	}
}

// shortNames are the column heads of the targets in the table of the rounds.
var shortNames = map[string]string{"a": "bare", "b": "web3gate", "c": "anvil", "d": "web3gate→anvil",
	"e": "bare fwd→anvil", "h": "token GET"}

// reportProxy prints the rounds and the summary of (a)-(e) and (h).
func reportProxy(w io.Writer, cfg runConfig, ts []*target, rounds []round) {
	_, withE := rounds[0].tput["e"]

	// The table of the rounds, and the series the summary takes the medians of.
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	ratio := func(rd round, x, y string) float64 { return rd.tput[x].wrk.Rate() / rd.tput[y].wrk.Rate() }
	p50 := func(lat map[string]sample, k string) float64 { return us(lat[k].wrk.P50) }
	fmt.Fprintln(w, "\nper round (req/s; p50 in µs at concurrency 1):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "round\t"
	for _, t := range ts {
		head += fmt.Sprintf("(%s) %s\t", t.key, shortNames[t.key])
	}
	head += "b/a\td/c\th/b\t"
	if withE {
		head += "e/c\t"
	}
	head += "p50 c\tp50 d\td−c\t"
	if withE {
		head += "p50 e\te−c\t"
	}
	fmt.Fprintln(tw, head+"most CPU of other processes\t")
	for r, rd := range rounds {
		line := fmt.Sprintf("%d\t", r+1)
		other := 0.0
		for _, t := range ts {
			s := rd.tput[t.key]
			line += rate(s) + "\t"
			add("rate "+t.key, s.wrk.Rate())
			add("cpu/req "+t.key, us(s.cpuPerRequest()))
			add("cores "+t.key, s.cores(s.serverCPU))
			add("idle "+t.key, s.idleShare())
			add("share "+t.key, s.cores(s.serverCPU)/float64(max(s.serverCPUs, 1)))
			if len(s.perServer) == 2 && s.wrk.Requests > 0 {
				add("front cpu/req "+t.key, us(s.perServer[0])/float64(s.wrk.Requests))
				add("anvil cpu/req "+t.key, us(s.perServer[1])/float64(s.wrk.Requests))
			}
			other = max(other, s.cores(s.otherCPU()))
		}
		for _, s := range rd.lat {
			other = max(other, s.cores(s.otherCPU()))
		}
		for k, s := range rd.lat1 {
			other = max(other, s.cores(s.otherCPU()))
			add("p50 "+k+" shared", p50(rd.lat1, k))
		}
		if len(rd.lat1) > 0 {
			add("d−c shared", p50(rd.lat1, "d")-p50(rd.lat1, "c"))
			if withE {
				add("e−c shared", p50(rd.lat1, "e")-p50(rd.lat1, "c"))
			}
		}
		add("other", other)
		add("b/a", ratio(rd, "b", "a"))
		add("d/c", ratio(rd, "d", "c"))
		add("h/b", ratio(rd, "h", "b"))
		line += fmt.Sprintf("%.3f\t%.3f\t%.3f\t", ratio(rd, "b", "a"), ratio(rd, "d", "c"), ratio(rd, "h", "b"))
		if withE {
			add("e/c", ratio(rd, "e", "c"))
			line += fmt.Sprintf("%.3f\t", ratio(rd, "e", "c"))
		}
		add("p50 c", p50(rd.lat, "c"))
		add("p50 d", p50(rd.lat, "d"))
		add("d−c", p50(rd.lat, "d")-p50(rd.lat, "c"))
		line += fmt.Sprintf("%.0f\t%.0f\t%.0f\t", p50(rd.lat, "c"), p50(rd.lat, "d"), p50(rd.lat, "d")-p50(rd.lat, "c"))
		if withE {
			add("p50 e", p50(rd.lat, "e"))
			add("e−c", p50(rd.lat, "e")-p50(rd.lat, "c"))
			line += fmt.Sprintf("%.0f\t%.0f\t", p50(rd.lat, "e"), p50(rd.lat, "e")-p50(rd.lat, "c"))
		}
		fmt.Fprintf(tw, "%s%.2f CPU\t\n", line, other)
	}
	tw.Flush()
	med := func(k string) float64 { return median(series[k]) }
	rng := func(k, format string) string {
		return fmt.Sprintf(format+"–"+format, slices.Min(series[k]), slices.Max(series[k]))
	}

	fmt.Fprintf(w, "\nsummary (median of %d rounds):\n", len(rounds))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\treq/s\tservers' CPU\tidle\tservers' CPU µs/request\t")
	for _, t := range ts {
		detail := ""
		if len(series["front cpu/req "+t.key]) > 0 {
			detail = fmt.Sprintf(" (%.1f in front + anvil %.1f)", med("front cpu/req "+t.key), med("anvil cpu/req "+t.key))
		}
		fmt.Fprintf(tw, "(%s) %s\t%.0f\t%.2f\t%.0f%%\t%.1f%s\t\n", t.key, t.name, med("rate "+t.key), med("cores "+t.key),
			100*med("idle "+t.key), med("cpu/req "+t.key), detail)
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\ttarget\tresult\t")
	fmt.Fprintf(tw, "throughput b/a\t%.3f\t%s\t≥ %.2f\t%s\t\n", med("b/a"), rng("b/a", "%.3f"), targetBA, verdict(med("b/a") >= targetBA))
	fmt.Fprintf(tw, "throughput d/c\t%.3f\t%s\t≥ %.2f\t%s\t\n", med("d/c"), rng("d/c", "%.3f"), targetDC, verdict(med("d/c") >= targetDC))
	fmt.Fprintf(tw, "throughput h/b (cached token GET)\t%.3f\t%s\t≥ %.2f\t%s\t\n", med("h/b"), rng("h/b", "%.3f"), targetHB, verdict(med("h/b") >= targetHB))
	fmt.Fprintf(tw, "p50 at c=1, (c) anvil\t%.0f µs\t%s µs\t\t\t\n", med("p50 c"), rng("p50 c", "%.0f"))
	fmt.Fprintf(tw, "p50 at c=1, (d) web3gate→anvil\t%.0f µs\t%s µs\t\t\t\n", med("p50 d"), rng("p50 d", "%.0f"))
	fmt.Fprintf(tw, "added p50 (d − c)\t%.0f µs\t%s µs\t≤ %.0f µs\t%s\t\n", med("d−c"), rng("d−c", "%.0f"), targetAddedP50, verdict(med("d−c") <= targetAddedP50))
	if withE {
		fmt.Fprintf(tw, "reference: throughput e/c\t%.3f\t%s\t\t\t\n", med("e/c"), rng("e/c", "%.3f"))
		fmt.Fprintf(tw, "reference: added p50 (e − c)\t%.0f µs\t%s µs\t\t\t\n", med("e−c"), rng("e−c", "%.0f"))
	}
	if len(series["d−c shared"]) > 0 {
		// The same latencies with wrk on the servers' CPUs: without the VM's wake-ups across
		// CPUs, which the chain wrk → web3gate → anvil pays more of than wrk → anvil.
		names, values := "(c) / (d)", fmt.Sprintf("%.0f / %.0f", med("p50 c shared"), med("p50 d shared"))
		if withE {
			names, values = names+" / (e)", values+fmt.Sprintf(" / %.0f", med("p50 e shared"))
		}
		fmt.Fprintf(tw, "reference, wrk on the servers' CPUs: p50 %s\t%s µs\t\t\t\t\n", names, values)
		fmt.Fprintf(tw, "reference, wrk on the servers' CPUs: added p50 (d − c)\t%.0f µs\t%s µs\t\t\t\n", med("d−c shared"), rng("d−c shared", "%.0f"))
		if withE {
			fmt.Fprintf(tw, "reference, wrk on the servers' CPUs: added p50 (e − c)\t%.0f µs\t%s µs\t\t\t\n", med("e−c shared"), rng("e−c shared", "%.0f"))
		}
	}
	tw.Flush()
	// CPU per request does not depend on how much CPU the servers got, so other processes
	// disturb it less than the rates.
	line := fmt.Sprintf("\nthe same ratios from the servers' CPU per request (less disturbed by other processes): b/a %.3f, d/c %.3f, h/b %.3f",
		med("cpu/req a")/med("cpu/req b"), med("cpu/req c")/med("cpu/req d"), med("cpu/req b")/med("cpu/req h"))
	if withE {
		line += fmt.Sprintf(", e/c %.3f", med("cpu/req c")/med("cpu/req e"))
	}
	fmt.Fprintln(w, line)

	var notes []string
	if o := slices.Max(series["other"]); o > 0.1 {
		notes = append(notes, fmt.Sprintf("other processes used up to %.2f CPU during a run: the rates are noisy; compare the ranges", o))
	}
	for _, t := range ts {
		switch {
		case med("idle "+t.key) > 0.05:
			notes = append(notes, fmt.Sprintf("(%s): the servers' CPUs were %.0f%% idle: the load did not saturate them", t.key, 100*med("idle "+t.key)))
		case cfg.loadCPUs != "" && med("share "+t.key) < 0.9:
			notes = append(notes, fmt.Sprintf("(%s): the servers got %.0f%% of their CPUs, other processes the rest: its rate is low", t.key, 100*med("share "+t.key)))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	if bad := failures(rounds); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE LOAD GOT ERRORS: these rates count failed requests and are not valid !!!!!\n%s\n", bad)
	}
}

func rate(s sample) string {
	if s.problems() != "" {
		return fmt.Sprintf("%.0f ERRORS", s.wrk.Rate())
	}
	return fmt.Sprintf("%.0f", s.wrk.Rate())
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
