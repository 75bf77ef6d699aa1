// Package lease runs the jobs that must run in one process at a time among the replicas
// sharing a store (the confirmer and the owners indexer of each chain): Hold blocks until this
// process holds the lease of the job's name, runs the job with a context cancelled the moment
// the lease is lost, and asks again after; it releases the lease when the job stops.
//
// Two kinds of lease, one API:
//
//   - PostgreSQL (postgres.go): a session advisory lock per lease name, held on one connection
//     of its own per process, proved alive by a heartbeat and watched between heartbeats, so
//     that a dropped or terminated session cancels the jobs at once. The server releases the
//     locks of a session that dies (a killed process: at once; a hung or cut-off one: after
//     idle_session_timeout), and a standby polling pg_try_advisory_lock takes over.
//   - A lease row in the store (table.go), for SQLite and any store without advisory locks:
//     holder, epoch, expiry; renewed by the holder, taken over by a standby once expired. A
//     holder that could not renew cancels its job well before the expiry, so two holders never
//     overlap.
//
// docs/leases.md gives the timings, how each kind of failure is bounded and the key
// derivation; docs/replicas.md the operator's view.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
)

// Deps are the collaborators of a Leases.
type Deps struct {
	// Logger receives "lease acquired", "lease lost" and "lease released"; the caller's
	// logger carries the replica id. nil discards.
	Logger *zap.Logger
	// Registry receives web3gate_lease_held, web3gate_lease_acquisitions_total and
	// web3gate_lease_losses_total; nil registers nothing.
	Registry prometheus.Registerer
}

// Open returns the Leases of the store db: advisory locks of its database on a connection of
// their own, opened with the store's own configuration (TLS and timeouts included), when db
// is on PostgreSQL; rows of its leases table otherwise.
func Open(cfg Config, db *store.DB, deps Deps) (*Leases, error) {
	if conf := db.PostgresConfig(); conf != nil {
		return NewPostgresConfig(conf, cfg, deps)
	}
	return NewTable(db, cfg, deps)
}

// Leases runs jobs under leases. Close it after every Hold has returned.
type Leases struct {
	cfg Config
	t   timings
	b   backend
	log *zap.Logger
	m   *metrics

	mu    sync.Mutex
	local map[string]chan struct{} // one Hold per lease name in this process at a time
	held  map[string]Held
}

// Held is a lease this process holds.
type Held struct {
	Name string `json:"name"`
	// Epoch is the lease row's epoch (lease rows); 0 for advisory locks.
	Epoch int64     `json:"epoch,omitempty"`
	Since time.Time `json:"since"`
}

// backend is one kind of lease.
type backend interface {
	// acquire blocks until this process holds name, or returns ctx's error when ctx ends
	// first. log carries the lease name.
	acquire(ctx context.Context, name string, log *zap.Logger) (*grant, error)
	close() error
}

// grant is one acquisition of a lease.
type grant struct {
	epoch int64
	// grace is how long the new holder waits before the job starts.
	grace time.Duration
	lost  chan struct{} // closed when the lease is lost
	once  sync.Once
	why   error // why it was lost; written before lost is closed
	// release gives the lease up once the job returned (lost or not); it returns when the
	// lease is free or known to be free soon, within a bounded time.
	release func() error
}

func newGrant(epoch int64, grace time.Duration) *grant {
	return &grant{epoch: epoch, grace: grace, lost: make(chan struct{})}
}

// lose marks the lease lost, once.
func (g *grant) lose(why error) {
	g.once.Do(func() {
		g.why = why
		close(g.lost)
	})
}

func (g *grant) isLost() bool {
	select {
	case <-g.lost:
		return true
	default:
		return false
	}
}

func newLeases(cfg Config, b backend, deps Deps) *Leases {
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Leases{cfg: cfg, t: cfg.timings(), b: b, log: log, m: newMetrics(deps.Registry),
		local: map[string]chan struct{}{}, held: map[string]Held{}}
}

// Replica is the replica id of this process.
func (l *Leases) Replica() string { return l.cfg.ReplicaID }

// Hold runs job under the lease name until ctx ends: it blocks until this process holds the
// lease, runs job with a context cancelled when the lease is lost or ctx ends, and after the
// job returned releases the lease (unless lost) and, while ctx lasts, asks for it again after
// leaseCheckInterval (a job that returned on its own, the lease still held, as well). Hold returns once the job returned and the lease was released. Two
// Holds of one name in one process take turns.
func (l *Leases) Hold(ctx context.Context, name string, job func(ctx context.Context)) {
	sem := l.sem(name)
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-sem }()
	log := l.log.With(zap.String("lease", name))
	m := l.m.lease(name)
	for ctx.Err() == nil {
		g, err := l.b.acquire(ctx, name, log)
		if err != nil {
			return // ctx ended
		}
		if g.grace > 0 {
			// A holder whose session just died may still be stopping its job.
			select {
			case <-time.After(g.grace):
			case <-g.lost:
			case <-ctx.Done():
			}
		}
		if g.isLost() || ctx.Err() != nil {
			l.release(g, log)
			continue
		}
		since := time.Now()
		l.setHeld(Held{Name: name, Epoch: g.epoch, Since: since})
		m.held.Set(1)
		m.acquisitions.Inc()
		log.Info("lease acquired", epochField(g.epoch)...)

		jctx, cancel := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-g.lost:
				cancel()
				m.held.Set(0)
				m.losses.Inc()
				l.clearHeld(name)
				log.Warn("lease lost: the job is cancelled", append(epochField(g.epoch), zap.Error(g.why),
					zap.Duration("held", time.Since(since)))...)
			case <-jctx.Done():
			}
		}()
		job(jctx)
		cancel()
		<-watched
		if g.isLost() {
			l.release(g, log) // a lease row may still be ours: the job has returned, free it
			// Whatever made this replica lose the lease may be its own: a standby, asking
			// within leaseCheckInterval, gets the first chance to take it.
			select {
			case <-time.After(l.t.check):
			case <-ctx.Done():
			}
			continue
		}
		m.held.Set(0)
		l.clearHeld(name)
		if err := g.release(); err != nil {
			log.Warn("lease release failed: it passes on when it expires", append(epochField(g.epoch), zap.Error(err))...)
		} else {
			log.Info("lease released", append(epochField(g.epoch), zap.Duration("held", time.Since(since)))...)
		}
		if ctx.Err() == nil {
			select {
			case <-time.After(l.t.check):
			case <-ctx.Done():
			}
		}
	}
}

// release gives up a lease that was lost or never used; failures are for debugging only.
func (l *Leases) release(g *grant, log *zap.Logger) {
	if err := g.release(); err != nil {
		log.Debug("lease: release after a loss failed", zap.Error(err))
	}
}

// HeldLeases are the leases this process holds, by name.
func (l *Leases) HeldLeases() []Held {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Held, 0, len(l.held))
	for _, h := range l.held {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Held) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close ends the leases' connection (PostgreSQL) and background work. Call it after every
// Hold returned.
func (l *Leases) Close() error { return l.b.close() }

func (l *Leases) sem(name string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.local[name]
	if !ok {
		s = make(chan struct{}, 1)
		l.local[name] = s
	}
	return s
}

func (l *Leases) setHeld(h Held) {
	l.mu.Lock()
	l.held[h.Name] = h
	l.mu.Unlock()
}

func (l *Leases) clearHeld(name string) {
	l.mu.Lock()
	delete(l.held, name)
	l.mu.Unlock()
}

func epochField(epoch int64) []zap.Field {
	if epoch == 0 {
		return nil
	}
	return []zap.Field{zap.Int64("epoch", epoch)}
}

// metrics are the lease metrics; lease names come from the configured chains (bounded).
type metrics struct {
	held         *prometheus.GaugeVec
	acquisitions *prometheus.CounterVec
	losses       *prometheus.CounterVec
}

type leaseMetrics struct {
	held         prometheus.Gauge
	acquisitions prometheus.Counter
	losses       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		held: f.NewGaugeVec(prometheus.GaugeOpts{Name: "web3gate_lease_held",
			Help: "1 while this replica holds the lease (runs its job), 0 while it stands by."}, []string{"lease"}),
		acquisitions: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_lease_acquisitions_total",
			Help: "Times this replica acquired the lease and started its job."}, []string{"lease"}),
		losses: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_lease_losses_total",
			Help: "Times this replica lost the lease while holding it (its job cancelled)."}, []string{"lease"}),
	}
}

// lease is the metrics of one lease name, the gauge set to 0 (a standby shows 0).
func (m *metrics) lease(name string) leaseMetrics {
	lm := leaseMetrics{held: m.held.WithLabelValues(name), acquisitions: m.acquisitions.WithLabelValues(name),
		losses: m.losses.WithLabelValues(name)}
	lm.held.Set(0)
	return lm
}

// instanceTag tells apart processes with the same replica id (two on one host, a restart).
func instanceTag() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("lease: random: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}
