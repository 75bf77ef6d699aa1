//go:build linux

// (wf), the write floor of (w): bench/wsfloor, a server that does nothing for a block but
// one write(2) per subscribed socket of frames built from bytes made before the block, with
// (w)'s subscribers, on the servers' CPU. Its delivery p99 (from the bench's trigger, a
// POST) is the cost of the 11,000 writes alone, the floor of any server's.

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// wsFloorRound measures (wf) once.
func wsFloorRound(ctx context.Context, cs *children, cfg runConfig, o wsOptions) (*wsSample, error) {
	var base string
	c, _, err := startServer(ctx, cs, "wsfloor", cfg.serverCPUs, o.floorBin, 1,
		func(p []int) ([]string, error) {
			base = "127.0.0.1:" + strconv.Itoa(p[0])
			return []string{"-addr", base, "-logs", strconv.Itoa(wsLogsPerBlock)}, nil
		},
		func([]int) error {
			resp, err := probeClient.Get("http://" + base + "/block")
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	if err != nil {
		return nil, err
	}
	defer func() { _ = cs.stop(c) }()
	s := &wsSample{}
	pid := c.cmd.Process.Pid
	if s.rssBefore, err = settledRSS(ctx, pid); err != nil {
		return nil, err
	}
	wc := newWSClient("ws://"+base+"/ws", http.Header{}, wsLogsPerBlock)
	defer wc.close()
	started := time.Now()
	if err := wc.subscribeAll(ctx, o.heads, o.logs, wsParallelDial, `{}`); err != nil {
		return nil, fmt.Errorf("wsfloor: %w", err)
	}
	s.connect = time.Since(started)
	if s.rssAfter, err = settledRSS(ctx, pid); err != nil {
		return nil, err
	}
	var sent []int64
	var numbers []uint64
	var wall, cpu, self, irq, busy time.Duration
	for b := range o.warmups + o.blocks {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200*time.Millisecond + rand.N(250*time.Millisecond)):
		}
		cpu0, self0, irq0, ct0, err := wsSnapshot(pid)
		if err != nil {
			return nil, err
		}
		n := uint64(b + 1)
		at := time.Now().UnixNano()
		resp, err := probeClient.Post("http://"+base+"/block?n="+strconv.FormatUint(n, 10), "text/plain", nil)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		sent, numbers = append(sent, at), append(numbers, n)
		want := int64((b + 1) * o.sockets())
		got, err := wc.waitDone(ctx, want, wsDeliverLimit)
		if err != nil {
			return nil, err
		}
		cpu1, self1, irq1, ct1, err := wsSnapshot(pid)
		if err != nil {
			return nil, err
		}
		if b >= o.warmups {
			wall += time.Duration(time.Now().UnixNano() - at)
			cpu += cpu1 - cpu0
			self += self1 - self0
			irq += irq1 - irq0
			busy += ct1["cpu"].busy - ct0["cpu"].busy
		}
		if got < want {
			s.problems = append(s.problems, fmt.Sprintf("block %d of the round: %d of %d deliveries within %v",
				b+1, got-int64(b*o.sockets()), o.sockets(), wsDeliverLimit))
			break
		}
	}
	if len(sent) > o.warmups {
		s.cpuPerBlock = cpu / time.Duration(len(sent)-o.warmups)
		s.irqPerBlock = irq / time.Duration(len(sent)-o.warmups)
		s.serverCores = cpu.Seconds() / wall.Seconds()
		s.otherCores = max(busy-cpu-self-irq, 0).Seconds() / wall.Seconds()
	}
	wc.close()
	s.problems = append(s.problems, collectDeliveries(s, wc.subs, numbers, sent, sent, o.warmups)...)
	return s, nil
}
