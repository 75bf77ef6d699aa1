package ratelimit

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Label values of the client label besides the configured client ids.
const (
	labelOther     = "other"     // a client id without an entry in rateLimit.clients
	labelAnonymous = "anonymous" // a REST request limited by its source address
)

type metrics struct {
	clients          map[string]*clientMetrics
	other, anonymous *clientMetrics
	fallback         prometheus.Counter
}

// clientMetrics are one client label value's counters, resolved once.
type clientMetrics struct {
	allowed, limited, quota, units prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, clients []string) (*metrics, error) {
	f := promauto.With(reg)
	reqs := f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_ratelimit_requests_total",
		Help: "Requests (a JSON-RPC batch or WebSocket message counts once; a REST request) by client (a client id of rateLimit.clients, other, or anonymous: REST limited by source address) and outcome (allowed, limited, quota).",
	}, []string{"client", "outcome"})
	units := f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_ratelimit_units_total",
		Help: "Compute units charged to allowed requests (REST: one per request), by client as in web3gate_ratelimit_requests_total.",
	}, []string{"client"})
	m := &metrics{clients: map[string]*clientMetrics{}}
	m.fallback = f.NewCounter(prometheus.CounterOpts{
		Name: "web3gate_ratelimit_local_fallback_total",
		Help: "Charges decided by this replica's local limiter, with its share of the budget (rateLimit.replicas), because Redis is configured but down or did not answer within rateLimit.redisTimeout.",
	})
	resolve := func(label string) *clientMetrics {
		return &clientMetrics{
			allowed: reqs.WithLabelValues(label, "allowed"),
			limited: reqs.WithLabelValues(label, "limited"),
			quota:   reqs.WithLabelValues(label, "quota"),
			units:   units.WithLabelValues(label),
		}
	}
	for _, c := range clients {
		m.clients[c] = resolve(c)
	}
	m.other = resolve(labelOther)
	m.anonymous = resolve(labelAnonymous)
	return m, nil
}

// client is the counters of client id id: its own when configured, else other's.
func (m *metrics) client(id string) *clientMetrics {
	if c, ok := m.clients[id]; ok {
		return c
	}
	return m.other
}
