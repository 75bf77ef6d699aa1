// The Book: each client id's usage in memory, and Charge, which enforces the quotas.

package quotas

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// maxQuota is the largest quota and usage total: the store keeps signed 64-bit totals.
const maxQuota = math.MaxInt64

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
