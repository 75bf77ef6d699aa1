//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// getCase is one kind of GET of a REST suite, (p) or (o): the URLs (path and query) its load
// rotates over, and the size of the page each must answer (what that means is the suite's
// check). An aside is shown but is neither in the mix nor a target.
type getCase struct {
	key, name string
	paths     []string
	want      int
	aside     bool
}

// getSample is one round of one kind, or of the mix.
type getSample struct {
	lat  sample // concurrency 1
	tput sample // the mix only: the throughput load
}

// getSuite measures the kinds of GET of one REST route against one web3gate: each kind at
// concurrency 1, then all of them (but the asides) mixed in equal shares, at concurrency 1
// and at the throughput load.
type getSuite struct {
	label  string // in progress and failure lines: "products", "owners"
	cases  []getCase
	rounds []map[string]getSample // by case key, "mix" for the mix
}

// mixCases are the kinds of the mix: every one but the asides.
func (g *getSuite) mixCases() []getCase {
	return slices.DeleteFunc(slices.Clone(g.cases), func(c getCase) bool { return c.aside })
}

// mixName is "mix of (first)-(last)".
func (g *getSuite) mixName() string {
	m := g.mixCases()
	return fmt.Sprintf("mix of (%s)-(%s)", m[0].key, m[len(m)-1].key)
}

// interleave is the mix: one URL of each kind in turn, each kind cycling through its URLs,
// until the kind with the most has listed them all; every kind weighs the same.
func interleave(cases []getCase) []string {
	n := 0
	for _, c := range cases {
		n = max(n, len(c.paths))
	}
	var out []string
	for i := range n {
		for _, c := range cases {
			out = append(out, c.paths[i%len(c.paths)])
		}
	}
	return out
}

// measure checks every URL with check, then runs the rounds against the web3gate server
// serving api (its admin listener admin), adding them to g.rounds.
func (g *getSuite) measure(ctx context.Context, cs *children, cfg runConfig, dir, api, admin string, server *child,
	check func(url string, want int) error) error {
	newTarget := func(key, name string, paths []string) (*target, error) {
		t := &target{key: key, name: name, method: http.MethodGet, url: api + paths[0], admin: admin, servers: []*child{server}}
		var err error
		t.script, err = rotatingScript(dir, t, paths)
		return t, err
	}
	targets := map[string]*target{}
	for _, c := range g.cases {
		for _, p := range c.paths {
			if err := check(api+p, c.want); err != nil {
				return fmt.Errorf("check (%s) %s: %w", c.key, c.name, err)
			}
		}
		t, err := newTarget(c.key, c.name, c.paths)
		if err != nil {
			return err
		}
		targets[c.key] = t
	}
	mt, err := newTarget("mix-"+g.label, "mix", interleave(g.mixCases()))
	if err != nil {
		return err
	}
	for r := range cfg.rounds {
		rd := map[string]getSample{}
		for _, i := range order(len(g.cases), r) {
			c := g.cases[i]
			s, err := measure(ctx, cs, cfg, targets[c.key], cfg.latency)
			if err != nil {
				return err
			}
			rd[c.key] = getSample{lat: s}
			g.progress(r, cfg, c.key, c.name, s, "c=1")
		}
		var ms getSample
		if ms.lat, err = measure(ctx, cs, cfg, mt, cfg.latency); err != nil {
			return err
		}
		g.progress(r, cfg, "mix", g.mixName(), ms.lat, "c=1")
		if ms.tput, err = measure(ctx, cs, cfg, mt, cfg.load); err != nil {
			return err
		}
		g.progress(r, cfg, "mix", g.mixName(), ms.tput, fmt.Sprintf("c=%d", cfg.load.conns))
		rd["mix"] = ms
		g.rounds = append(g.rounds, rd)
	}
	return nil
}

func (g *getSuite) progress(r int, cfg runConfig, key, name string, s sample, conc string) {
	line := fmt.Sprintf("round %d/%d  (%s) %-26s %s: p50 %6.0f µs, p99 %6.0f µs, %7.0f req/s; web3gate %.2f CPU, %6.1f µs CPU/req; other processes %.2f CPU",
		r+1, cfg.rounds, key, name, conc, us(s.wrk.P50), us(s.wrk.P99), s.wrk.Rate(), s.cores(s.serverCPU), us(s.cpuPerRequest()), s.cores(s.otherCPU()))
	if p := s.problems(); p != "" {
		line += "\n    !!! ERRORS: " + p
	}
	fmt.Println(line)
}

// report prints the table of the kinds and the mix (medians of the rounds; what is the
// header of its first column) and the mix at the throughput load, then the targets: the
// mix's p99 and the slowest kind's (asides aside) at concurrency 1, each at most target.
func (g *getSuite) report(w io.Writer, cfg runConfig, what string, target time.Duration) {
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	for _, rd := range g.rounds {
		for k, s := range rd {
			add("p50 "+k, us(s.lat.wrk.P50))
			add("p99 "+k, us(s.lat.wrk.P99))
			add("rate "+k, s.lat.wrk.Rate())
			add("cpu "+k, us(s.lat.cpuPerRequest()))
			if k == "mix" {
				add("tput", s.tput.wrk.Rate())
				add("tput p99", us(s.tput.wrk.P99))
				add("tput cpu", us(s.tput.cpuPerRequest()))
			}
		}
	}
	med := func(k string) float64 { return median(series[k]) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s (median of the rounds, concurrency 1)\tURLs\tp50\tp99\tp99 range\treq/s\tweb3gate CPU µs/req\t\n", what)
	row := func(k, name string, n int) {
		fmt.Fprintf(tw, "(%s) %s\t%d\t%.0f µs\t%.0f µs\t%.0f–%.0f µs\t%.0f\t%.0f\t\n", k, name, n, med("p50 "+k), med("p99 "+k),
			slices.Min(series["p99 "+k]), slices.Max(series["p99 "+k]), med("rate "+k), med("cpu "+k))
	}
	worst, worstKey := 0.0, ""
	for _, c := range g.cases {
		row(c.key, c.name, len(c.paths))
		if v := med("p99 " + c.key); !c.aside && v > worst {
			worst, worstKey = v, c.key
		}
	}
	row("mix", g.mixName(), len(interleave(g.mixCases())))
	tw.Flush()
	fmt.Fprintf(w, "mix at the throughput load (%s): %.0f req/s, p99 %.0f µs, %.0f µs web3gate CPU/req\n", cfg.load, med("tput"), med("tput p99"), med("tput cpu"))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\ttarget\tresult\t")
	ms := target.Seconds() * 1000
	fmt.Fprintf(tw, "%s p99, %s at c=1\t%.2f ms\t≤ %.0f ms\t%s\t\n", g.label, g.mixName(), med("p99 mix")/1000, ms, verdict(med("p99 mix") <= us(target)))
	fmt.Fprintf(tw, "%s p99, slowest kind (%s) at c=1\t%.2f ms\t≤ %.0f ms\t%s\t\n", g.label, worstKey, worst/1000, ms, verdict(worst <= us(target)))
	tw.Flush()
}

// failures lists the runs that got errors, "" when none did.
func (g *getSuite) failures() string {
	if g == nil {
		return ""
	}
	var lines []string
	for i, rd := range g.rounds {
		for _, k := range slices.Sorted(maps.Keys(rd)) {
			for _, s := range []sample{rd[k].lat, rd[k].tput} {
				if p := s.problems(); p != "" {
					lines = append(lines, fmt.Sprintf("  round %d, (%s) %s: %s", i+1, k, g.label, p))
				}
			}
		}
	}
	return strings.Join(lines, "\n")
}

// probeGet GETs url with the probe client and returns the answer and its body (at most
// limit bytes).
func probeGet(url string, limit int64) (*http.Response, []byte, error) {
	resp, err := probeClient.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp, body, err
}
