package proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Limits that keep a crowd of clients, or one hostile client, from taking the process's
// memory: the open connections (all, and those of one source address) and the memory of the
// request bodies read as they arrive. Both are counted once per connection or per large
// body, never per ordinary request.

// connLimits admits connections: at most total open, at most perIP from one source address.
// A connection over a limit is answered at once (the request is not read, so the answer has
// the JSON-RPC error shape) and closed, before the server spends anything on it.
type connLimits struct {
	total, perIP int

	mu   sync.Mutex
	open int
	byIP map[netip.Addr]int

	// The answers to refused connections, and their counters.
	busy, crowded               []byte
	refusedBusy, refusedCrowded prometheus.Counter
}

func newConnLimits(total, perIP int, refused *prometheus.CounterVec) *connLimits {
	busy := jsonrpc.ErrLimitExceeded.Withf("server busy: %d connections are open, the most it takes; retry later", total)
	crowded := jsonrpc.ErrLimitExceeded.Withf("too many connections: %d are open from this address, the most it may open", perIP)
	return &connLimits{
		total:          total,
		perIP:          perIP,
		byIP:           make(map[netip.Addr]int),
		busy:           refusal(http.StatusServiceUnavailable, busy),
		crowded:        refusal(http.StatusTooManyRequests, crowded),
		refusedBusy:    refused.WithLabelValues("connections"),
		refusedCrowded: refused.WithLabelValues("connections_per_address"),
	}
}

// refusal is the whole HTTP answer to a refused connection.
func refusal(status int, e *jsonrpc.Error) []byte {
	body := jsonrpc.AppendResponse(nil, nil, nil, e)
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nServer: web3gate\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// admit counts c, from ip, as open and reports true; or, when that would exceed a limit,
// answers and closes c and reports false.
func (l *connLimits) admit(c net.Conn, ip netip.Addr) bool {
	var answer []byte
	l.mu.Lock()
	switch {
	case l.total > 0 && l.open >= l.total:
		answer = l.busy
		l.refusedBusy.Inc()
	case l.perIP > 0 && ip.IsValid() && l.byIP[ip] >= l.perIP:
		answer = l.crowded
		l.refusedCrowded.Inc()
	default:
		l.open++
		if ip.IsValid() {
			l.byIP[ip]++
		}
	}
	l.mu.Unlock()
	if answer == nil {
		return true
	}
	// A new socket's send buffer takes the answer at once; the deadline is a safeguard.
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(answer)
	_ = c.Close()
	return false
}

// release counts out a connection admitted from ip.
func (l *connLimits) release(ip netip.Addr) {
	l.mu.Lock()
	l.open--
	if ip.IsValid() {
		if n := l.byIP[ip]; n <= 1 {
			delete(l.byIP, ip)
		} else {
			l.byIP[ip] = n - 1
		}
	}
	l.mu.Unlock()
}

// count is the number of open connections.
func (l *connLimits) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// bodyBudget bounds the memory of the request bodies read as they arrive (see readBody):
// each such body takes the bytes it allocates before it allocates them, and gives them back
// once its request is answered. The same type bounds the answers queued for the sockets
// (socketSet.budget). Limit 0: no bound.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
	free  *memFreer // told of what is taken and given back; nil: none
}

// take takes n bytes, or reports false when they would exceed the limit.
func (b *bodyBudget) take(n int) bool {
	if b.limit <= 0 {
		return true
	}
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	if b.free != nil {
		b.free.add(int64(n))
	}
	return true
}

// give gives back n bytes taken.
func (b *bodyBudget) give(n int) {
	if b.limit > 0 && n != 0 {
		b.used.Add(-int64(n))
		if b.free != nil {
			b.free.add(-int64(n))
		}
	}
}

// freeMemoryInterval is the shortest time between two runs of debug.FreeOSMemory.
const freeMemoryInterval = 10 * time.Second

// freeMemorySettle is how long after a drop is seen the memory is freed at the earliest. A
// budget is given back just before the memory it counted becomes garbage (a message's buffer
// when its reader returns, a socket's buffers when it ends), and a crowd of sockets closed
// by one deadline ends over a moment: a collection at once would find most of it still
// live, and, its peak reset, would not run again (198 stalled frames: RSS stayed 138 MiB up).
const freeMemorySettle = time.Second

// memFreer returns memory to the operating system after a large drop of the bytes the
// budgets hold (server.freeMemoryAfterDrop). Go's runtime does it by itself, but only after
// a garbage collection, which an idle process may not run for two minutes, and then
// gradually: after a burst of large bodies or answers, the process would keep their memory
// (its RSS) for minutes. debug.FreeOSMemory collects and returns it at once; it stops the
// world briefly, so it runs at most every freeMemoryInterval (a drop meanwhile is freed at
// the interval's end).
type memFreer struct {
	drop      int64 // server.freeMemoryAfterDrop
	held      atomic.Int64
	peak      atomic.Int64 // the most held since the last run
	scheduled atomic.Bool
	last      atomic.Int64 // unix nanoseconds of the last run
	runs      prometheus.Counter
}

// add counts d bytes taken (positive) or given back (negative) by a budget.
func (f *memFreer) add(d int64) {
	h := f.held.Add(d)
	if d > 0 {
		for p := f.peak.Load(); h > p && !f.peak.CompareAndSwap(p, h); p = f.peak.Load() {
		}
		return
	}
	if f.peak.Load()-h >= f.drop && f.scheduled.CompareAndSwap(false, true) {
		wait := time.Until(time.Unix(0, f.last.Load()).Add(freeMemoryInterval))
		time.AfterFunc(max(wait, freeMemorySettle), f.run)
	}
}

// run returns the freed memory to the operating system.
func (f *memFreer) run() {
	f.peak.Store(f.held.Load())
	debug.FreeOSMemory()
	f.last.Store(time.Now().UnixNano())
	f.runs.Inc()
	f.scheduled.Store(false)
}
