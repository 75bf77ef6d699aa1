//go:build linux

package main

// The rate-limit stage's cost:
//
//	(l) web3gate answering eth_chainId itself, as (b), with the rate-limit stage on: every
//	    request charged one compute unit (rateLimit.costs: {eth_chainId: 1}; it costs 0 by
//	    default) to the client's and the principal's budgets, both far above what the load
//	    spends, so that no request is refused and every answer carries the RateLimit-*
//	    headers; against (b), measured in the same rounds, whose config turns the stage off.
//	    Target: throughput l/b ≥ 0.95.
//
// Each run checks from (l)'s metrics that every request was charged and none refused.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

const targetLB = 0.95 // throughput with the rate-limit stage, relative to (b) without it

// rateLimitRun is the whole measurement.
type rateLimitRun struct {
	b, l     *target
	rounds   []map[string]sample
	problems []string
}

// measureRateLimit starts (b) and (l) and measures their throughput in alternating order.
func measureRateLimit(ctx context.Context, cs *children, cfg runConfig, env signEnv) (*rateLimitRun, error) {
	dir, err := os.MkdirTemp(env.tmp, "ratelimit-")
	if err != nil {
		return nil, err
	}
	fmt.Println("ratelimit: starting (b) and (l)...")
	lr := &rateLimitRun{}
	lr.b = &target{key: "b", name: "web3gate eth_chainId", body: chainIDBody, headers: devHeaders}
	wb, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (b)", devConfig(env.root, dir))
	if err != nil {
		return nil, err
	}
	lr.b.url, lr.b.admin, lr.b.servers = api+"/v1/web3/mainnet", admin, []*child{wb}
	lr.l = &target{key: "l", name: "web3gate eth_chainId, rate-limited", body: chainIDBody, headers: devHeaders}
	wl, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (l)", limitedConfig(env.root, dir))
	if err != nil {
		return nil, err
	}
	lr.l.url, lr.l.admin, lr.l.servers = api+"/v1/web3/mainnet", admin, []*child{wl}
	for _, t := range []*target{lr.b, lr.l} {
		if _, err := rpcResult(t); err != nil {
			return nil, fmt.Errorf("check (%s): %w", t.key, err)
		}
		if t.script, err = writeScript(dir, t); err != nil {
			return nil, err
		}
	}
	if err := checkLimited(lr.l, "1000000000"); err != nil {
		return nil, fmt.Errorf("check (l): %w", err)
	}
	if err := checkLimited(lr.b, ""); err != nil {
		return nil, fmt.Errorf("check (b): %w", err)
	}
	ts := []*target{lr.b, lr.l}
	for r := range cfg.rounds {
		tput := map[string]sample{}
		for _, i := range order(len(ts), r) {
			s, err := measure(ctx, cs, cfg, ts[i], cfg.load)
			if err != nil {
				return lr, err
			}
			tput[ts[i].key] = s
			progress(r, cfg, ts[i], s, fmt.Sprintf("%9.0f req/s", s.wrk.Rate()))
		}
		lr.rounds = append(lr.rounds, tput)
	}
	if err := lr.checkCharged(); err != nil {
		lr.problems = append(lr.problems, "  "+err.Error())
	}
	return lr, nil
}

// checkLimited checks that t's answer carries RateLimit-Limit limit ("": none).
func checkLimited(t *target, limit string) error {
	req, err := http.NewRequest(http.MethodPost, t.url, strings.NewReader(t.body))
	if err != nil {
		return err
	}
	for _, h := range t.headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := resp.Header.Get("RateLimit-Limit"); got != limit {
		return fmt.Errorf("RateLimit-Limit %q, want %q", got, limit)
	}
	return nil
}

// checkCharged checks from (l)'s metrics that its requests were charged and none refused.
func (lr *rateLimitRun) checkCharged() error {
	series, err := metricsWithPrefix(lr.l.admin, "web3gate_ratelimit_requests_total")
	if err != nil {
		return err
	}
	var n float64
	for _, rd := range lr.rounds {
		s := rd["l"]
		n += float64(s.warm.Requests + s.wrk.Requests)
	}
	allowed := series[`web3gate_ratelimit_requests_total{client="other",outcome="allowed"}`]
	limited := series[`web3gate_ratelimit_requests_total{client="other",outcome="limited"}`]
	if allowed < n || limited != 0 {
		return fmt.Errorf("(l): %.0f requests allowed and %.0f limited by the stage, want at least %.0f allowed and none limited", allowed, limited, n)
	}
	return nil
}

// limitedConfig is (l): the shipped config.yaml as (b) has it, with the rate-limit stage on,
// eth_chainId charged a unit, and budgets that the load never spends.
func limitedConfig(root, dir string) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		raw, err := os.ReadFile(filepath.Join(root, "config.yaml"))
		if err != nil {
			return "", err
		}
		const costs = "\n  costs: {}\n"
		if !strings.Contains(string(raw), costs) {
			return "", fmt.Errorf("config.yaml: no %q to replace", strings.TrimSpace(costs))
		}
		raw = []byte(strings.Replace(string(raw), costs, "\n  costs: {eth_chainId: 1}\n", 1))
		out, err := configBytes(raw, api, admin, true)
		if err != nil {
			return "", fmt.Errorf("config.yaml: %w", err)
		}
		path := filepath.Join(dir, "web3gate-limited.yaml")
		return path, os.WriteFile(path, out, 0o600)
	}
}

// report prints the rounds and the median ratio.
func (lr *rateLimitRun) report(w io.Writer, cfg runConfig) {
	if lr == nil || len(lr.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\n===== rate limits: (l) eth_chainId charged a unit by the rate-limit stage, against (b) without it =====\n")
	fmt.Fprintf(w, "throughput %s\n", cfg.load)
	var lb, cpu, rb, rl, cb, cl []float64
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\t(b) req/s\t(l) req/s\tl/b\t(b) CPU µs/req\t(l) CPU µs/req\t")
	for i, rd := range lr.rounds {
		b, l := rd["b"], rd["l"]
		lb = append(lb, l.wrk.Rate()/b.wrk.Rate())
		rb, rl = append(rb, b.wrk.Rate()), append(rl, l.wrk.Rate())
		cb, cl = append(cb, us(b.cpuPerRequest())), append(cl, us(l.cpuPerRequest()))
		if l.cpuPerRequest() > 0 {
			cpu = append(cpu, float64(b.cpuPerRequest())/float64(l.cpuPerRequest()))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.3f\t%.1f\t%.1f\t\n", i+1, rate(b), rate(l), lb[i], us(b.cpuPerRequest()), us(l.cpuPerRequest()))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\ttarget\tresult\t")
	fmt.Fprintf(tw, "(b) / (l) req/s\t%.0f / %.0f\t\t\t\t\n", median(rb), median(rl))
	fmt.Fprintf(tw, "throughput l/b (rate-limit stage)\t%.3f\t%.3f–%.3f\t≥ %.2f\t%s\t\n", median(lb), slices.Min(lb), slices.Max(lb), targetLB, verdict(median(lb) >= targetLB))
	if len(cpu) > 0 {
		fmt.Fprintf(tw, "l/b from the servers' CPU per request\t%.3f\t\t\t\t\n", median(cpu))
	}
	fmt.Fprintf(tw, "CPU per request, (b) / (l)\t%.1f / %.1f µs\t\t\t\t\n", median(cb), median(cl))
	tw.Flush()
	if bad := lr.failures(); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE LOAD GOT ERRORS: these rates are not valid !!!!!\n%s\n", bad)
	}
}

// failures lists the runs that got errors or requests the stage refused, "" when none.
func (lr *rateLimitRun) failures() string {
	if lr == nil {
		return ""
	}
	lines := slices.Clone(lr.problems)
	for i, rd := range lr.rounds {
		for _, k := range []string{"b", "l"} {
			if p := rd[k].problems(); p != "" {
				lines = append(lines, fmt.Sprintf("  round %d, (%s): %s", i+1, k, p))
			}
		}
	}
	return strings.Join(lines, "\n")
}
