//go:build linux

package main

import (
	"github.com/web3gate/web3gate/wallet"

	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// signHeader adds the description of the signing measurements to the report's header.
func signHeader(tw io.Writer, cfg runConfig, specs []*signSpec) {
	pin := "wrk and web3gate share every CPU"
	if cfg.loadCPUs != "" {
		pin = fmt.Sprintf("wrk pinned to CPU %s, web3gate on every CPU: the targets are rates of the machine", cfg.loadCPUs)
	}
	orders := make([]string, cfg.rounds)
	for r := range orders {
		for _, i := range order(len(specs), r) {
			orders[r] += specs[i].t.key + " "
		}
		orders[r] = strings.TrimSpace(orders[r]) // keys of several letters: f g f-pkcs11
	}
	fmt.Fprintf(tw, "signing\teach round of (f) and (g) on a fresh web3gate: the shipped config.yaml (embedded dev chain %d, dev credentials), its store, keystore and JWT key in a new temporary directory; %d rounds (orders %s); %s\n",
		devChainID, cfg.rounds, strings.Join(orders, ", "), pin)
	for _, sp := range specs {
		l := load{threads: cfg.load.threads, conns: cfg.load.conns, duration: sp.duration}
		var set []string
		for _, s := range sp.settings {
			set = append(set, s[0]+" "+s[1])
		}
		what := "the same body every call, each taking its own nonce"
		if sp.postgres {
			what = fmt.Sprintf("as (%s), the store a fresh PostgreSQL database per round (CREATE DATABASE, dropped after; maxConns %d per replica)", strings.TrimSuffix(sp.t.key, "2"), benchMaxConns)
			if sp.replicas > 1 {
				what += fmt.Sprintf(", %d replicas: wrk's threads load one each; the first runs the embedded dev chain, the other has it as its node (through the first one's /v1/web3/chains/%d); the account's key in the store; the nonce check over both replicas' calls", sp.replicas, devChainID)
			}
		} else if sp.backend != "" {
			what = fmt.Sprintf("as (f), from an account whose key is made each round on %s with `web3gate accounts new --backend %s` and funded from %s (the account named here) before the load", backendBench[sp.backend], sp.backend, sp.account)
		} else if sp.t.key == "g'" {
			what = "the transaction object a wallet sends ({from, to, value}: web3gate fills gas by eth_estimateGas, the EIP-1559 fees and data); otherwise as (g)"
		} else if sp.sends() {
			what = fmt.Sprintf("the dev chain mining them; eth_getTransactionCount latest before the load, and after it once latest = pending and neither moved for %v: it must have risen by the sends answered ok", settleQuiet)
		}
		if sp.replicas > 1 {
			l.threads = max(l.threads, sp.replicas)
		}
		fmt.Fprintf(tw, "(%s)\t%s after a %v warm-up: %s from %s, 1 wei to %s; %s; wallet.transactions: %s\n",
			sp.t.key, l, cfg.warmup, sp.method, sp.account, sinkAddress, what, strings.Join(set, ", "))
	}
}

// reportSigning prints the rounds and the summary of (f) and (g).
func reportSigning(w io.Writer, cfg runConfig, specs []*signSpec, rounds []signRound) {
	series := map[string][]float64{}
	add := func(k string, v float64) { series[k] = append(series[k], v) }
	med := func(k string) float64 { return median(series[k]) }
	rng := func(k, format string) string {
		return fmt.Sprintf(format+"–"+format, slices.Min(series[k]), slices.Max(series[k]))
	}
	has := map[string]bool{}
	for _, sp := range specs {
		has[sp.t.key] = true
	}

	fmt.Fprintln(w, "\nsigning, per round (calls/s; 1-s rates by web3gate's count of calls answered ok, each whole second of the run):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "round\t"
	for _, sp := range specs {
		if sp.sends() {
			head += "(" + sp.t.key + ") send/s\t1-s first → last, min\tsends ok\tnonces mined\tpending − latest\tchain caught up after\t"
		} else {
			head += "(" + sp.t.key + ") sign/s\t1-s first → last, min\t"
		}
	}
	fmt.Fprintln(tw, head+"web3gate start\tmost CPU of other processes\t")
	gapRounds := []string{}
	invalid := map[string]bool{} // keys with a round that got errors
	for r, rd := range rounds {
		line := fmt.Sprintf("%d\t", r+1)
		other := 0.0
		var starts []string
		for _, sp := range specs {
			k := sp.t.key
			s := rd[k]
			rate := fmt.Sprintf("%.0f", s.wrk.Rate())
			if s.problems() != "" {
				rate += " ERRORS"
				invalid[k] = true
			}
			line += rate + "\t" + secsText(s.secs) + "\t"
			add("rate "+k, s.wrk.Rate())
			if len(s.secs) > 0 {
				add("min1s "+k, slices.Min(s.secs))
			}
			add("cpu/req "+k, us(s.cpuPerRequest()))
			add("pg/req "+k, us(s.pgPerRequest()))
			add("p50 "+k, us(s.wrk.P50))
			add("p99 "+k, us(s.wrk.P99))
			add("cores "+k, s.cores(s.serverCPU))
			add("idle "+k, s.idleShare())
			add("share "+k, s.cores(s.serverCPU)/float64(max(s.serverCPUs, 1)))
			other = max(other, s.cores(s.otherCPU()))
			starts = append(starts, fmt.Sprintf("%s %.1f s", k, s.startup.Seconds()))
			if sp.sends() {
				line += fmt.Sprintf("%.0f\t%d\t%d\t%d ms\t", s.okCalls, int64(s.endCount)-int64(s.startCount),
					int64(s.endPending)-int64(s.endCount), s.settled.Milliseconds())
				if strings.Contains(s.nonces, "MISMATCH") {
					gapRounds = append(gapRounds, fmt.Sprintf("%d (%s)", r+1, k))
				}
			}
		}
		add("other", other)
		fmt.Fprintf(tw, "%s%s\t%.2f CPU\t\n", line, strings.Join(starts, ", "), other)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nsigning summary (median of %d rounds):\n", len(rounds))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tcalls/s\tlatency p50 / p99\tweb3gate's CPU\tidle\tweb3gate's CPU µs/call (the in-process dev chain's included)\tPostgreSQL backends' CPU µs/call\t")
	for _, sp := range specs {
		k := sp.t.key
		pg := "-"
		if sp.postgres {
			pg = fmt.Sprintf("%.1f", med("pg/req "+k))
		}
		fmt.Fprintf(tw, "(%s) web3gate %s\t%.0f\t%.1f / %.1f ms\t%.2f\t%.0f%%\t%.1f\t%s\t\n", k, sp.method, med("rate "+k), med("p50 "+k)/1000, med("p99 "+k)/1000,
			med("cores "+k), 100*med("idle "+k), med("cpu/req "+k), pg)
	}
	tw.Flush()

	result := func(k string, ok bool) string {
		if invalid[k] {
			return "INVALID: errors"
		}
		return verdict(ok)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\trange over rounds\ttarget\tresult\t")
	for _, sp := range specs {
		k := sp.t.key
		switch k {
		case "f":
			fmt.Fprintf(tw, "(f) eth_signTransaction rate, %v\t%.0f/s\t%s/s\t≥ %.0f/s\t%s\t\n", sp.duration, med("rate f"), rng("rate f", "%.0f"), targetSignRate, result("f", med("rate f") >= targetSignRate))
		case "g":
			fmt.Fprintf(tw, "(g) eth_sendTransaction rate, %v sustained\t%.0f/s\t%s/s\t≥ %.0f/s\t%s\t\n", sp.duration, med("rate g"), rng("rate g", "%.0f"), targetSendRate, result("g", med("rate g") >= targetSendRate))
			if len(series["min1s g"]) > 0 {
				fmt.Fprintf(tw, "(g) lowest 1-s rate in the run\t%.0f/s\t%s/s\t\t\t\n", med("min1s g"), rng("min1s g", "%.0f"))
			}
		case "f2":
			fmt.Fprintf(tw, "(f2) eth_signTransaction rate on PostgreSQL, %v\t%.0f/s\t%s/s\t\t%s\t\n", sp.duration, med("rate f2"), rng("rate f2", "%.0f"), result("f2", true))
			if has["f"] && med("rate f") > 0 {
				fmt.Fprintf(tw, "f2/f: PostgreSQL against SQLite\t%.3f\t\t\t\t\n", med("rate f2")/med("rate f"))
				fmt.Fprintf(tw, "(f2) − (f) web3gate CPU per signature\t%+.1f µs\t\t\t\t\n", med("cpu/req f2")-med("cpu/req f"))
			}
		case "g2":
			fmt.Fprintf(tw, "(g2) eth_sendTransaction rate, %d replicas on PostgreSQL, %v sustained\t%.0f/s\t%s/s\t≥ %.0f/s\t%s\t\n", sp.replicas, sp.duration, med("rate g2"), rng("rate g2", "%.0f"), targetSendRate, result("g2", med("rate g2") >= targetSendRate))
			if len(series["min1s g2"]) > 0 {
				fmt.Fprintf(tw, "(g2) lowest 1-s rate in the run\t%.0f/s\t%s/s\t\t\t\n", med("min1s g2"), rng("min1s g2", "%.0f"))
			}
			if has["g"] && med("rate g") > 0 {
				fmt.Fprintf(tw, "g2/g: two replicas on PostgreSQL against one on SQLite\t%.3f\t\t\t\t\n", med("rate g2")/med("rate g"))
				fmt.Fprintf(tw, "(g2) − (g) web3gate CPU per send (both replicas)\t%+.1f µs\t\t\t\t\n", med("cpu/req g2")-med("cpu/req g"))
			}
		case "f-pkcs11", "f-awskms":
			fmt.Fprintf(tw, "(%s) eth_signTransaction rate on %s, %v\t%.0f/s\t%s/s\t\t%s\t\n", k, backendBench[sp.backend], sp.duration, med("rate "+k), rng("rate "+k, "%.0f"), result(k, true))
			if has["f"] && med("rate f") > 0 {
				fmt.Fprintf(tw, "%s/f: %s against the keystore\t%.3f\t\t\t\t\n", k, backendBench[sp.backend], med("rate "+k)/med("rate f"))
				fmt.Fprintf(tw, "(%s) − (f) web3gate CPU per signature\t%+.1f µs\t\t\t\t\n", k, med("cpu/req "+k)-med("cpu/req f"))
			}
		case "g'":
			fmt.Fprintf(tw, "(g') eth_sendTransaction of {from, to, value}, filled, %v\t%.0f/s\t%s/s\t\t%s\t\n", sp.duration, med("rate g'"), rng("rate g'", "%.0f"), result("g'", true))
			if has["g"] && med("rate g") > 0 {
				fmt.Fprintf(tw, "g'/g: filled against complete sends\t%.3f\t\t\t\t\n", med("rate g'")/med("rate g"))
				fmt.Fprintf(tw, "(g') − (g) web3gate CPU per send\t%+.1f µs\t\t\t\t\n", med("cpu/req g'")-med("cpu/req g"))
			}
		}
	}
	var sends []string
	for _, sp := range specs {
		if sp.sends() {
			sends = append(sends, "("+sp.t.key+")")
		}
	}
	if len(sends) > 0 {
		gaps, result := "0", "PASS"
		if len(gapRounds) > 0 {
			gaps, result = "MISMATCH in round "+strings.Join(gapRounds, ", "), "FAIL"
		}
		fmt.Fprintf(tw, "%s nonce gaps\t%s\tevery round checked\t0\t%s\t\n", strings.Join(sends, ", "), gaps, result)
	}
	tw.Flush()

	var notes []string
	if o := slices.Max(series["other"]); o > 0.1 {
		notes = append(notes, fmt.Sprintf("other processes used up to %.2f CPU during a signing run: the rates are noisy; compare the ranges", o))
	}
	for _, sp := range specs {
		if sp.backend == wallet.BackendAWSKMS {
			notes = append(notes, "(f-awskms): local-kms is a process of its own: its CPU counts under other processes, not web3gate's; (f-pkcs11): SoftHSM2 is a library loaded into web3gate, its CPU is web3gate's")
			break
		}
	}
	for _, sp := range specs {
		if sp.postgres {
			notes = append(notes, "(f2), (g2): PostgreSQL's own CPU is not web3gate's: the backends of the round's database are measured apart; the server's shared processes (WAL writer, checkpointer) count under other processes")
			break
		}
	}
	for _, sp := range specs {
		k := sp.t.key
		if med("idle "+k) > 0.25 {
			notes = append(notes, fmt.Sprintf("(%s): the CPUs were %.0f%% idle: web3gate's rate is bound by waits (store commits, locks, the chain), not by CPU",
				k, 100*med("idle "+k)))
		}
		var first, last []float64
		for _, rd := range rounds {
			if s := rd[k].secs; len(s) > 1 {
				first, last = append(first, s[0]), append(last, s[len(s)-1])
			}
		}
		if len(first) > 0 && median(last) < 0.8*median(first) {
			notes = append(notes, fmt.Sprintf("(%s): the rate falls during the run (median 1-s rate %.0f/s in the first second, %.0f/s in the last) while web3gate's store fills: no steady state, the figure depends on the duration",
				k, median(first), median(last)))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	if bad := signFailures(rounds); bad != "" {
		fmt.Fprintf(w, "\n!!!!! THE SIGNING LOAD GOT ERRORS: these rates count failed requests or lost nonces and are not valid !!!!!\n%s\n", bad)
	}
}

func signProgress(r int, cfg runConfig, sp *signSpec, s signSample) {
	pg := ""
	if sp.postgres {
		pg = fmt.Sprintf("; PostgreSQL backends %.2f CPU, %6.1f µs CPU/call", s.cores(s.pgCPU), us(s.pgPerRequest()))
	}
	line := fmt.Sprintf("round %d/%d  (%s) %-22s %7.0f calls/s over %v (1-s rates %s)   web3gate %.2f CPU, %6.1f µs CPU/call, CPUs %3.0f%% idle%s; wrk %.2f CPU; other processes %.2f CPU\n    %s",
		r+1, cfg.rounds, sp.t.key, sp.t.name, s.wrk.Rate(), sp.duration, secsText(s.secs), s.cores(s.serverCPU), us(s.cpuPerRequest()),
		100*s.idleShare(), pg, s.cores(s.wrk.CPU), s.cores(s.otherCPU()), s.nonces)
	if p := s.problems(); p != "" {
		line += "\n    !!! ERRORS: " + p
	}
	fmt.Println(line)
}

// secsText sums up per-second rates: first → last, and the lowest.
func secsText(secs []float64) string {
	if len(secs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f → %.0f, min %.0f", secs[0], secs[len(secs)-1], slices.Min(secs))
}

// signFailures lists the signing runs that got errors, "" when none did.
func signFailures(rounds []signRound) string {
	var lines []string
	for i, rd := range rounds {
		for _, k := range slices.Sorted(maps.Keys(rd)) {
			if p := rd[k].problems(); p != "" {
				lines = append(lines, fmt.Sprintf("  round %d, (%s) signing: %s", i+1, k, p))
			}
		}
	}
	return strings.Join(lines, "\n")
}
