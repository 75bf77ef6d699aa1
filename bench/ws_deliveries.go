//go:build linux

// (w)'s deliveries: the latency of every notification received, and what went wrong.

package main

import (
	"fmt"
	"slices"
	"time"
)

// collectDeliveries fills s's latencies from what the subscribers received, and returns
// what was wrong: a block missing or twice, a block not mined by the bench, bad notifications.
// numbers are the blocks mined, starts and sent their start times and send times; the first
// warmups blocks are not measured.
func collectDeliveries(s *wsSample, subs []*subscriber, numbers []uint64, starts, sent []int64, warmups int) []string {
	index := make(map[uint64]int, len(numbers))
	for i, n := range numbers {
		index[n] = i
	}
	// The block's first delivery to any subscriber.
	first := make([]int64, len(numbers))
	for _, sub := range subs {
		for _, d := range sub.got {
			if i, ok := index[d.block]; ok && (first[i] == 0 || d.first < first[i]) {
				first[i] = d.first
			}
		}
	}
	var problems []string
	var missing, twice, stray, bad, ended, noStamp int
	var firstBad, firstEnd string
	for _, sub := range subs {
		seen := make([]int, len(numbers))
		for _, d := range sub.got {
			i, ok := index[d.block]
			if !ok {
				stray++
				continue
			}
			seen[i]++
			if seen[i] > 1 || i < warmups {
				continue
			}
			if d.last == 0 {
				noStamp++
				continue
			}
			lat := d.last - starts[i]
			s.all = append(s.all, lat)
			if sub.logs {
				s.logs = append(s.logs, lat)
			} else {
				s.heads = append(s.heads, lat)
			}
			s.fromSend = append(s.fromSend, d.last-sent[i])
			s.spread = append(s.spread, d.last-first[i])
			s.seen = append(s.seen, d.seen-starts[i])
		}
		for _, c := range seen {
			switch {
			case c == 0:
				missing++
			case c > 1:
				twice++
			}
		}
		if sub.bad > 0 {
			if bad == 0 {
				firstBad = sub.badMsg
			}
			bad += sub.bad
		}
		if sub.err != nil {
			if ended == 0 {
				firstEnd = sub.err.Error()
			}
			ended++
		}
	}
	for _, c := range []struct {
		n    int
		what string
	}{{missing, "block deliveries missing"}, {twice, "blocks delivered twice to a socket"},
		{stray, "deliveries of blocks the bench did not mine"}, {noStamp, "deliveries without a kernel receive time"},
		{bad, "bad notifications (first: " + firstBad + ")"}, {ended, "sockets closed by the server (first: " + firstEnd + ")"}} {
		if c.n > 0 {
			problems = append(problems, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	for _, xs := range [][]int64{s.all, s.heads, s.logs, s.fromSend, s.spread, s.seen} {
		slices.Sort(xs)
	}
	return problems
}

// quantile is the q-quantile of sorted (nearest rank), 0 for none.
func quantile(sorted []int64, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999999) - 1
	return time.Duration(sorted[min(max(i, 0), len(sorted)-1)])
}
