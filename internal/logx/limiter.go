// Package logx holds the log helpers shared by several packages: the bounded logger that
// keeps a flood of similar lines (refused requests under attack, an upstream outage
// answered thousands of times a second) from drowning the log.
package logx

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config is `log.flood`: the bound of similar lines.
type Config struct {
	// Lines is how many lines of one kind (a route and a reason, see Limiter.Check) are
	// written per Interval; the others are counted and reported in one summary line.
	Lines int `yaml:"lines"`
	// Interval is the window of Lines.
	Interval time.Duration `yaml:"interval"`
}

// SetDefaults fills unset fields with their defaults: 20 lines per 10s.
func (c *Config) SetDefaults() {
	if c.Lines == 0 {
		c.Lines = 20
	}
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if c.Lines < 1 || c.Lines > 1000000 {
		errs = append(errs, errors.New("lines: must be between 1 and 1000000"))
	}
	if c.Interval < 100*time.Millisecond || c.Interval > time.Hour {
		errs = append(errs, errors.New("interval: must be between 100ms and 1h"))
	}
	return errors.Join(errs...)
}

// maxKinds bounds the kinds a Limiter tracks at once; lines of a kind beyond it share one
// overflow kind. Kinds come from bounded sets (routes, statuses, error codes), so this is
// only a guard.
const maxKinds = 4096

// SummaryMessage is the message of the line that reports the lines a Limiter suppressed.
const SummaryMessage = "similar log lines suppressed"

// Limiter lets at most Lines lines of each kind per Interval through. A kind is a scope (a
// route, a component) and a reason (an HTTP status, an error code, a refusal's cause). The
// lines over the bound are counted; once the interval is over, one summary line
// (SummaryMessage, on the logger and at the level of the suppressed lines) says how many
// were suppressed, with their scope, reason and message. A summary is written by the next
// line of its kind or by Flush, whichever comes first (Run flushes every Interval). One
// Limiter serves the whole process; safe for concurrent use.
type Limiter struct {
	lines    int
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	kinds map[kind]*window
}

type kind struct{ scope, reason string }

// window is one kind's count in its current interval.
type window struct {
	log        *zap.Logger // of the suppressed lines
	start      time.Time
	written    int
	suppressed int
	level      zapcore.Level
	msg        string
}

// New returns a Limiter of cfg (its zero fields: their defaults). now is the clock (nil:
// time.Now).
func New(cfg Config, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	cfg.SetDefaults()
	return &Limiter{lines: cfg.Lines, interval: cfg.Interval, now: now, kinds: map[kind]*window{}}
}

// Check is log.Check for a line of kind (scope, reason): the entry to write the line to, or
// nil when the level is off or the kind has had its Lines this interval (the line is then
// counted for the summary).
func (l *Limiter) Check(log *zap.Logger, lvl zapcore.Level, msg, scope, reason string) *zapcore.CheckedEntry {
	if !log.Core().Enabled(lvl) {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	k := kind{scope, reason}
	w := l.kinds[k]
	if w == nil {
		if len(l.kinds) >= maxKinds {
			k = kind{"other", "other"}
			w = l.kinds[k]
		}
		if w == nil {
			w = &window{start: now}
			l.kinds[k] = w
		}
	}
	var summary *summaryLine
	if now.Sub(w.start) >= l.interval {
		summary = w.roll(k, now)
	}
	ok := w.written < l.lines
	if ok {
		w.written++
	} else {
		w.suppressed++
		w.log, w.level, w.msg = log, lvl, msg
	}
	l.mu.Unlock()
	if summary != nil {
		l.write(summary)
	}
	if !ok {
		return nil
	}
	return log.Check(lvl, msg)
}

// summaryLine is a summary to write, taken under the lock and written outside it.
type summaryLine struct {
	kind
	log        *zap.Logger
	level      zapcore.Level
	msg        string
	suppressed int
	since      time.Time
}

// roll starts a new interval for the kind k at now and returns the summary of the one that
// ended, nil when it suppressed nothing.
func (w *window) roll(k kind, now time.Time) *summaryLine {
	var s *summaryLine
	if w.suppressed > 0 {
		s = &summaryLine{kind: k, log: w.log, level: w.level, msg: w.msg, suppressed: w.suppressed, since: w.start}
	}
	w.start, w.written, w.suppressed = now, 0, 0
	return s
}

func (l *Limiter) write(s *summaryLine) {
	if ce := s.log.Check(s.level, SummaryMessage); ce != nil {
		ce.Write(zap.String("scope", s.scope), zap.String("reason", s.reason), zap.String("message", s.msg),
			zap.Int("suppressed", s.suppressed), zap.Duration("within", l.now().Sub(s.since)))
	}
}

// Flush writes the summaries of the kinds whose interval is over, and forgets the kinds that
// wrote nothing in their last interval.
func (l *Limiter) Flush() {
	now := l.now()
	var out []*summaryLine
	l.mu.Lock()
	for k, w := range l.kinds {
		if now.Sub(w.start) < l.interval {
			continue
		}
		if w.written == 0 && w.suppressed == 0 {
			delete(l.kinds, k)
			continue
		}
		if s := w.roll(k, now); s != nil {
			out = append(out, s)
		}
	}
	l.mu.Unlock()
	for _, s := range out {
		l.write(s)
	}
}

// Run flushes every Interval until ctx ends, then once more.
func (l *Limiter) Run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.flushAll()
			return
		case <-t.C:
			l.Flush()
		}
	}
}

// flushAll writes every pending summary, whether or not its interval is over: the last word
// of a stopping process.
func (l *Limiter) flushAll() {
	now := l.now()
	var out []*summaryLine
	l.mu.Lock()
	for k, w := range l.kinds {
		if s := w.roll(k, now); s != nil {
			out = append(out, s)
		}
	}
	l.mu.Unlock()
	for _, s := range out {
		l.write(s)
	}
}
