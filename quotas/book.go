// Package quotas keeps the quotas of compute units per client id and UTC day or calendar month
// (the `quotas:` section): the rate-limit stage charges each call's units through Book.Charge,
// which refuses a client whose quota of the period is spent.
//
// Usage is durable in the store, one row per (client id, period kind, period start), summed
// over every replica. Charge never waits for the store: it adds to counters in memory, and a
// flusher adds them to the store every flushInterval with one atomic upsert per row
// (units = units + the delta, RETURNING units), which tells it the sum of every replica's
// flushed charges. A quota is enforced on that last known total plus this replica's charges
// not yet flushed, so the replicas together can overshoot a quota by what they charge within
// about one flush interval. The total of a row this replica has not seen yet is read from
// the store in the background; until it is known the charges are allowed and counted.
//
// The store down: charges go on from memory (no request fails for it), their deltas are kept
// and added at the first flush that succeeds; each failed flush is logged and counted.
package quotas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// maxQuota is the largest quota and usage total: the store keeps signed 64-bit totals.
const maxQuota = math.MaxInt64

// Periods, indexes of the per-period arrays.
const (
	day = iota
	month
	periods
)

var (
	periodNames = [periods]string{store.UsageDay, store.UsageMonth}
	periodWords = [periods]string{"daily", "monthly"}
)

// periodStart is the first instant of the period of kind p that holds t (UTC).
func periodStart(p int, t time.Time) time.Time {
	t = t.UTC()
	if p == day {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// periodEnd is the first instant after the period of kind p that starts at start.
func periodEnd(p int, start time.Time) time.Time {
	if p == day {
		return start.AddDate(0, 0, 1)
	}
	return start.AddDate(0, 1, 0)
}

// Retention: the flusher deletes, about once an hour, the rows of periods that started more
// than retainMonths months before the current month.
const (
	retainMonths  = 13
	pruneInterval = time.Hour
)

// idleAfter is how long a client id with nothing left to flush stays in memory after its last
// charge; its totals are read from the store again when it comes back.
func idleAfter(flush time.Duration) time.Duration { return max(time.Minute, 10*flush) }

// batchRows bounds the rows one store transaction of the flusher writes or reads.
const batchRows = 500

// ErrExceeded matches (errors.Is) a refusal of Charge: the quota of a period is spent.
var ErrExceeded = errors.New("quota exceeded")

// ExceededError is Charge's refusal. Its Error is the client-facing message.
type ExceededError struct {
	Period   string    // store.UsageDay or store.UsageMonth
	Quota    uint64    // the period's quota, in units
	ResetsAt time.Time // the start of the next period (UTC)
	retry    time.Duration
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("quota exceeded: %s quota of %d units spent; resets at %s",
		periodWords[periodIndex(e.Period)], e.Quota, e.ResetsAt.Format(time.RFC3339))
}

// RetryAfter is the time from the refused charge to the reset of the period.
func (e *ExceededError) RetryAfter() time.Duration { return e.retry }

// Is makes errors.Is(err, ErrExceeded) hold.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

func periodIndex(name string) int {
	if name == store.UsageMonth {
		return month
	}
	return day
}

// Deps are the Book's collaborators.
type Deps struct {
	// DB holds the usage rows (required).
	DB *store.DB
	// Logger: nil, no logs.
	Logger *zap.Logger
	// Registry receives the metrics; nil: they are not registered.
	Registry prometheus.Registerer
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// row is one period's usage of a client id as this replica knows it.
type row struct {
	period     int
	start, end time.Time // the period: [start, end)
	// total is the store's total as last learned (a flush's RETURNING, or a read); it
	// includes this replica's flushed charges. known: it was learned at all.
	total uint64
	known bool
	// pending is charged here and not yet handed to a flush; flushing is in the flush in
	// progress (back to pending when it fails).
	pending, flushing uint64
}

func (r *row) used() uint64 { return satAdd(satAdd(r.total, r.pending), r.flushing) }

func (r *row) unflushed() uint64 { return satAdd(r.pending, r.flushing) }

// client is what this replica holds of one client id.
type client struct {
	quota [periods]uint64 // 0: none
	cur   [periods]*row   // the current period's rows
	// stale are rows of ended periods with charges not yet in the store (a rollover while
	// they were unflushed); dropped once flushed.
	stale   []*row
	charged time.Time // the last charge
}

// Book records usage and enforces the quotas; Charge is safe for concurrent use.
type Book struct {
	cfg    Config
	db     *store.DB
	log    *zap.Logger
	now    func() time.Time
	quotas map[string][periods]uint64

	mu      sync.Mutex
	clients map[string]*client

	units       map[string]prometheus.Counter // by configured client id, and "other"
	exceeded    [periods]prometheus.Counter
	flushErrors prometheus.Counter
	unrecorded  prometheus.Counter
	unflushed   prometheus.Gauge

	// The flusher's own state.
	failing   bool      // the last flush or read failed
	lastWarn  time.Time // the last failure logged
	lastPrune time.Time

	wake        chan struct{} // a row whose total is unknown appeared
	start, stop sync.Once
	quit, done  chan struct{}
	started     bool
}

// otherClient labels the units of client ids without a configured quota.
const otherClient = "other"

// New builds a Book (cfg's unset fields defaulted, then validated). Start runs its flusher;
// Close stops it after a last flush.
func New(cfg Config, deps Deps) (*Book, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("quotas: %w", err)
	}
	if deps.DB == nil {
		return nil, errors.New("quotas: a store is required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	reg := deps.Registry
	if reg == nil {
		reg = prometheus.NewRegistry() // unexported: the metrics are kept but not served
	}
	f := promauto.With(reg)
	b := &Book{
		cfg: cfg, db: deps.DB, log: log, now: now,
		quotas: map[string][periods]uint64{}, clients: map[string]*client{}, units: map[string]prometheus.Counter{},
		flushErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "web3gate_quota_flush_errors_total",
			Help: "Flushes of quota usage to the store, and reads of usage totals from it, that failed (the usage is kept in memory and flushed later).",
		}),
		unrecorded: f.NewCounter(prometheus.CounterOpts{
			Name: "web3gate_quota_unrecorded_units_total",
			Help: "Compute units charged by client ids without a quota that were not recorded: quotas.maxClients client ids were held in memory already.",
		}),
		unflushed: f.NewGauge(prometheus.GaugeOpts{
			Name: "web3gate_quota_unflushed_units",
			Help: "Compute units charged on this replica and not yet in the store, as of the last flush.",
		}),
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	unitsVec := f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_quota_units_total",
		Help: "Compute units charged to quotas, by client id (configured clients; every other client id is \"other\").",
	}, []string{"client"})
	exceededVec := f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_quota_exceeded_total",
		Help: "Calls refused because the client's quota of the period (day, month) was spent.",
	}, []string{"period"})
	for p := range periods {
		b.exceeded[p] = exceededVec.WithLabelValues(periodNames[p])
	}
	b.units[otherClient] = unitsVec.WithLabelValues(otherClient)
	for _, q := range cfg.Clients {
		b.quotas[q.ClientID] = [periods]uint64{q.Daily, q.Monthly}
		b.units[q.ClientID] = unitsVec.WithLabelValues(q.ClientID)
	}
	return b, nil
}

// Enabled reports whether quotas.enabled is on (Charge records and enforces).
func (b *Book) Enabled() bool { return b.cfg.Enabled }

// Charge adds units to clientID's usage. It never blocks on the store. It returns nil, or an
// *ExceededError (errors.Is ErrExceeded) whose Error() is the client-facing message and whose
// RetryAfter is the time until the period resets, when a quota of clientID is spent: its
// used units (the store's last known total and this replica's unflushed charges) reached
// the quota. A call is refused only once the quota is reached, so the call that reaches it
// may go past it by its own cost; a call of 0 units is never refused. A refused call is not
// charged. The charges of a client id that cannot be stored (empty, over 256 bytes, not
// UTF-8 or with a NUL) are not recorded. With quotas disabled Charge does nothing.
func (b *Book) Charge(clientID string, units uint64) error {
	if !b.cfg.Enabled {
		return nil
	}
	now := b.now().UTC()
	b.mu.Lock()
	c := b.clients[clientID]
	if c == nil {
		q, configured := b.quotas[clientID]
		// A client id the store cannot hold would fail every flush of its batch.
		if !configured && (len(b.clients) >= b.cfg.MaxClients || !recordable(clientID)) {
			b.mu.Unlock()
			b.unrecorded.Add(float64(units))
			return nil
		}
		c = &client{quota: q}
		b.clients[clientID] = c
	}
	c.charged = now
	fresh := false
	for p := range periods {
		if r := c.cur[p]; r == nil || now.Before(r.start) || !now.Before(r.end) {
			if r != nil && r.unflushed() > 0 {
				c.stale = append(c.stale, r)
			}
			start := periodStart(p, now)
			c.cur[p] = &row{period: p, start: start, end: periodEnd(p, start)}
			fresh = true
		}
	}
	if units > 0 {
		for p := range periods {
			if q := c.quota[p]; q > 0 && c.cur[p].used() >= q {
				b.mu.Unlock()
				b.exceeded[p].Inc()
				reset := c.cur[p].end
				return &ExceededError{Period: periodNames[p], Quota: q, ResetsAt: reset, retry: reset.Sub(now)}
			}
		}
		for p := range periods {
			r := c.cur[p]
			r.pending = satAdd(r.pending, units)
		}
	}
	b.mu.Unlock()
	if fresh {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	if units > 0 {
		ctr, ok := b.units[clientID]
		if !ok {
			ctr = b.units[otherClient]
		}
		ctr.Add(float64(units))
	}
	return nil
}

// recordable reports whether clientID can be a row of the store (and asked for on the admin
// route): 1 to 256 bytes of UTF-8 without NUL.
func recordable(clientID string) bool {
	return clientID != "" && len(clientID) <= maxClientIDLen && store.CheckText("", clientID) == nil
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// Start runs the flusher: every flushInterval it adds the charges to the store, and it reads
// the totals of new rows as they appear. With quotas disabled it does nothing.
func (b *Book) Start() {
	if !b.cfg.Enabled {
		return
	}
	b.start.Do(func() {
		b.started = true
		go b.loop()
	})
}

// Close stops the flusher and flushes what is left (bounded by the store's transaction
// timeout); charges after Close are not flushed. It returns the last flush's error.
func (b *Book) Close() error {
	var err error
	b.stop.Do(func() {
		close(b.quit)
		if b.started {
			<-b.done
		}
		if b.cfg.Enabled {
			err = b.flush(context.Background())
		}
	})
	return err
}

func (b *Book) loop() {
	defer close(b.done)
	t := time.NewTicker(b.cfg.FlushInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.quit
		cancel()
	}()
	for {
		select {
		case <-b.quit:
			return
		case <-b.wake:
			if !b.failing { // else the next tick tries, not every new client id
				_ = b.load(ctx)
			}
		case <-t.C:
			_ = b.flush(ctx)
			_ = b.load(ctx)
			b.prune(ctx)
		}
	}
}

// item is one row's part in a flush or a read.
type item struct {
	client string
	r      *row
	delta  uint64
	total  uint64
}

func (it *item) key() store.UsageKey {
	return store.UsageKey{ClientID: it.client, Period: periodNames[it.r.period], Start: it.r.start}
}

// compareItems orders a flush's rows the same on every replica, so that two replicas'
// transactions lock shared rows in one order (PostgreSQL).
func compareItems(a, b item) int {
	if c := strings.Compare(a.client, b.client); c != 0 {
		return c
	}
	if a.r.period != b.r.period {
		return a.r.period - b.r.period
	}
	return a.r.start.Compare(b.r.start)
}

// flush adds every row's pending charges to the store, batchRows rows per transaction, and
// learns their totals; a batch that fails gives its charges back to pending (as do the
// batches after it, not tried). Rows and client ids with nothing left to flush and no recent
// charge are dropped from memory.
func (b *Book) flush(ctx context.Context) error {
	now := b.now().UTC()
	var items []item
	b.mu.Lock()
	for id, c := range b.clients {
		for _, r := range slices.Concat(c.cur[:], c.stale) {
			if r != nil && r.pending > 0 {
				items = append(items, item{client: id, r: r, delta: r.pending})
				r.flushing, r.pending = r.flushing+r.pending, 0
			}
		}
	}
	b.mu.Unlock()
	slices.SortFunc(items, compareItems)

	var err error
	done := 0
	for done < len(items) && err == nil {
		batch := items[done:min(len(items), done+batchRows)]
		err = b.db.Write(ctx, func(tx *store.Tx) error {
			for i := range batch {
				total, err := tx.AddUsage(ctx, batch[i].key(), batch[i].delta, now)
				if err != nil {
					return err
				}
				batch[i].total = total
			}
			return nil
		})
		if err == nil {
			done += len(batch)
		}
	}

	b.mu.Lock()
	for i := range items {
		it := &items[i]
		it.r.flushing -= it.delta
		if i < done {
			it.r.total, it.r.known = it.total, true
		} else {
			it.r.pending = satAdd(it.r.pending, it.delta)
		}
	}
	var unflushed uint64
	idle := now.Add(-idleAfter(b.cfg.FlushInterval))
	for id, c := range b.clients {
		c.stale = slices.DeleteFunc(c.stale, func(r *row) bool { return r.unflushed() == 0 })
		left := uint64(0)
		for _, r := range slices.Concat(c.cur[:], c.stale) {
			if r != nil {
				left = satAdd(left, r.unflushed())
			}
		}
		if left == 0 && c.charged.Before(idle) {
			delete(b.clients, id)
		}
		unflushed = satAdd(unflushed, left)
	}
	b.mu.Unlock()
	b.unflushed.Set(float64(unflushed))
	if err != nil {
		err = fmt.Errorf("quotas: flush usage: %w", err)
	}
	b.outcome(err, "flush", len(items)-done, unflushed)
	return err
}

// load reads from the store the totals of the current rows not known yet.
func (b *Book) load(ctx context.Context) error {
	var items []item
	b.mu.Lock()
	for id, c := range b.clients {
		for _, r := range c.cur {
			if r != nil && !r.known {
				items = append(items, item{client: id, r: r})
			}
		}
	}
	b.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	var err error
	for done := 0; done < len(items) && err == nil; done += batchRows {
		batch := items[done:min(len(items), done+batchRows)]
		err = b.db.Read(ctx, func(tx *store.Tx) error {
			for i := range batch {
				total, err := tx.Usage(ctx, batch[i].key())
				if err != nil {
					return err
				}
				batch[i].total = total
			}
			return nil
		})
		if err == nil {
			b.mu.Lock()
			for _, it := range batch {
				// A flush since the read learned a newer total.
				if !it.r.known {
					it.r.total, it.r.known = it.total, true
				}
			}
			b.mu.Unlock()
		}
	}
	if err != nil {
		err = fmt.Errorf("quotas: read usage: %w", err)
	}
	b.outcome(err, "read", 0, 0)
	return err
}

// outcome logs the failures of the store, at most one line per flush interval, and the first
// success after them; it counts each failure.
func (b *Book) outcome(err error, what string, rows int, unflushed uint64) {
	if err == nil {
		if b.failing {
			b.failing = false
			b.log.Info("quota usage reaches the store again")
		}
		return
	}
	b.flushErrors.Inc()
	if errors.Is(err, context.Canceled) {
		return
	}
	b.failing = true
	now := time.Now()
	if now.Sub(b.lastWarn) < b.cfg.FlushInterval {
		return
	}
	b.lastWarn = now
	b.log.Warn("quota usage: the store failed; charges go on from memory and are flushed later",
		zap.String("op", what), zap.Int("rows", rows), zap.Uint64("unflushed_units", unflushed), zap.Error(err))
}

// prune deletes, about once per pruneInterval, the rows of periods that started more than
// retainMonths months before the current month.
func (b *Book) prune(ctx context.Context) {
	now := b.now().UTC()
	if now.Sub(b.lastPrune) < pruneInterval {
		return
	}
	b.lastPrune = now
	before := periodStart(month, now).AddDate(0, -retainMonths, 0)
	var n int64
	err := b.db.Write(ctx, func(tx *store.Tx) (err error) {
		n, err = tx.PruneUsage(ctx, before)
		return err
	})
	if err != nil {
		b.outcome(fmt.Errorf("quotas: prune usage: %w", err), "prune", 0, 0)
		return
	}
	if n > 0 {
		b.log.Info("quota usage of old periods pruned", zap.Int64("rows", n), zap.Time("before", before))
	}
}

// Usage is what the admin route reports of one client id and period.
type Usage struct {
	Start     time.Time `json:"start"`
	Used      uint64    `json:"used"`
	Quota     *uint64   `json:"quota"`     // null: no quota
	Remaining *uint64   `json:"remaining"` // null: no quota
	ResetsAt  time.Time `json:"resetsAt"`
}

// ClientUsage is the admin route's answer.
type ClientUsage struct {
	ClientID string `json:"clientId"`
	// Enforced: quotas are enabled and the client id has a quota.
	Enforced bool  `json:"enforced"`
	Day      Usage `json:"day"`
	Month    Usage `json:"month"`
}

// Usage reads clientID's usage of the current day and month: the store's totals (every
// replica's flushed charges) and this replica's charges not yet flushed.
func (b *Book) Usage(ctx context.Context, clientID string) (*ClientUsage, error) {
	now := b.now().UTC()
	var totals [periods]uint64
	err := b.db.Read(ctx, func(tx *store.Tx) error {
		for p := range periods {
			n, err := tx.Usage(ctx, store.UsageKey{ClientID: clientID, Period: periodNames[p], Start: periodStart(p, now)})
			if err != nil {
				return err
			}
			totals[p] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("quotas: read usage: %w", err)
	}
	q, configured := b.quotas[clientID]
	u := &ClientUsage{ClientID: clientID, Enforced: b.cfg.Enabled && configured}
	b.mu.Lock()
	c := b.clients[clientID]
	for p := range periods {
		start := periodStart(p, now)
		if c != nil && c.cur[p] != nil && c.cur[p].start.Equal(start) {
			totals[p] = satAdd(totals[p], c.cur[p].unflushed())
		}
	}
	b.mu.Unlock()
	for p, dst := range [periods]*Usage{&u.Day, &u.Month} {
		start := periodStart(p, now)
		*dst = Usage{Start: start, Used: min(totals[p], maxQuota), ResetsAt: periodEnd(p, start)}
		if q[p] > 0 {
			quota, remaining := q[p], uint64(0)
			if dst.Used < quota {
				remaining = quota - dst.Used
			}
			dst.Quota, dst.Remaining = &quota, &remaining
		}
	}
	return u, nil
}
