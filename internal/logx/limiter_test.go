package logx

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testLimiter is a Limiter with its clock and the logger its tests write to.
type testLimiter struct {
	*Limiter
	log *zap.Logger
}

func (l testLimiter) check(lvl zapcore.Level, msg, scope, reason string) *zapcore.CheckedEntry {
	return l.Check(l.log, lvl, msg, scope, reason)
}

func newTestLimiter(lines int) (testLimiter, *observer.ObservedLogs, *clock) {
	core, logs := observer.New(zapcore.InfoLevel)
	c := &clock{t: time.Unix(1700000000, 0)}
	return testLimiter{New(Config{Lines: lines, Interval: 10 * time.Second}, c.now), zap.New(core)}, logs, c
}

// flood writes n lines of one kind, as a flood of refused requests would.
func flood(l testLimiter, n int, scope, reason string) {
	for i := range n {
		if ce := l.check(zapcore.WarnLevel, "token request refused", scope, reason); ce != nil {
			ce.Write(zap.Int("i", i))
		}
	}
}

// TestFloodIsBounded: 500 refusals of one kind within an interval write Lines lines; the
// next interval's first line is preceded by one summary counting the others.
func TestFloodIsBounded(t *testing.T) {
	l, logs, c := newTestLimiter(5)
	flood(l, 500, "oauth2/token", "400")
	if n := logs.FilterMessage("token request refused").Len(); n != 5 {
		t.Fatalf("%d lines within the interval, want 5", n)
	}
	if n := logs.FilterMessage(SummaryMessage).Len(); n != 0 {
		t.Fatalf("%d summaries before the interval ended", n)
	}
	c.add(10 * time.Second)
	flood(l, 1, "oauth2/token", "400")
	sums := logs.FilterMessage(SummaryMessage).AllUntimed()
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1", len(sums))
	}
	f := sums[0].ContextMap()
	if f["suppressed"] != int64(495) || f["scope"] != "oauth2/token" || f["reason"] != "400" ||
		f["message"] != "token request refused" || sums[0].Level != zapcore.WarnLevel {
		t.Fatalf("summary %v %v", sums[0].Level, f)
	}
	if n := logs.FilterMessage("token request refused").Len(); n != 6 {
		t.Fatalf("%d lines after the second interval's first, want 6", n)
	}
}

// TestKindsAreBoundedApart: each (scope, reason) has its own bound.
func TestKindsAreBoundedApart(t *testing.T) {
	l, logs, _ := newTestLimiter(3)
	flood(l, 100, "rpc", "401")
	flood(l, 100, "rpc", "503")
	flood(l, 100, "oauth2/token", "401")
	if n := logs.Len(); n != 9 {
		t.Fatalf("%d lines, want 3 of each of 3 kinds", n)
	}
}

// TestFlushReportsAnEndedFlood: a flood that stops is summarized by Flush once its interval
// is over (Run flushes every interval), and not before; an idle kind is then forgotten.
func TestFlushReportsAnEndedFlood(t *testing.T) {
	l, logs, c := newTestLimiter(2)
	flood(l, 50, "rpc", "429")
	l.Flush()
	if n := logs.FilterMessage(SummaryMessage).Len(); n != 0 {
		t.Fatalf("a summary before the interval ended")
	}
	c.add(11 * time.Second)
	l.Flush()
	sums := logs.FilterMessage(SummaryMessage).AllUntimed()
	if len(sums) != 1 || sums[0].ContextMap()["suppressed"] != int64(48) {
		t.Fatalf("summaries %v", sums)
	}
	c.add(11 * time.Second)
	l.Flush()
	if len(l.kinds) != 0 {
		t.Fatalf("%d kinds kept after an idle interval", len(l.kinds))
	}
	if n := logs.FilterMessage(SummaryMessage).Len(); n != 1 {
		t.Fatalf("%d summaries, want the one", n)
	}
}

// TestRunFlushesAtStop: the summaries pending when Run's context ends are written.
func TestRunFlushesAtStop(t *testing.T) {
	l, logs, _ := newTestLimiter(1)
	flood(l, 10, "rpc", "400")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	cancel()
	<-done
	sums := logs.FilterMessage(SummaryMessage).AllUntimed()
	if len(sums) != 1 || sums[0].ContextMap()["suppressed"] != int64(9) {
		t.Fatalf("summaries %v", sums)
	}
}

// TestLevelOffIsNotCounted: a line below the logger's level is neither written nor counted.
func TestLevelOffIsNotCounted(t *testing.T) {
	l, logs, c := newTestLimiter(1)
	for range 10 {
		if ce := l.check(zapcore.DebugLevel, "quiet", "rpc", "x"); ce != nil {
			t.Fatal("a debug entry from an info logger")
		}
	}
	c.add(time.Minute)
	l.Flush()
	if logs.Len() != 0 {
		t.Fatalf("%d lines", logs.Len())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Lines: 0, Interval: time.Second}, {Lines: 1, Interval: time.Millisecond}, {Lines: 1, Interval: 2 * time.Hour}} {
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
	var d Config
	d.SetDefaults()
	if err := d.Validate(); err != nil || d.Lines != 20 || d.Interval != 10*time.Second {
		t.Errorf("defaults %+v: %v", d, err)
	}
}
