package metadata

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	lookups      *prometheus.CounterVec
	fetches      *prometheus.CounterVec
	redisLookups *prometheus.CounterVec
	hits         map[string]prometheus.Counter // lookups{result="hit"} by kind, resolved once
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_metadata_lookups_total",
			Help: "Token and contract metadata lookups by kind (token, contract) and how they were served: hit, miss, stale (served, refreshed in the background), retry (a failed document's backoff passed), refresh (forceRefresh), cooldown (forceRefresh inside the cooldown), negative (a 404 remembered for negativeTtl, no chain read).",
		}, []string{"kind", "result"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_metadata_fetches_total",
			Help: "Metadata records fetched (chain reads and document), by whether the document could be had (ok, failed).",
		}, []string{"result"}),
		redisLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_metadata_redis_lookups_total",
			Help: "Metadata record lookups in Redis (after a memory miss, before the store), by kind and result: hit, miss, error (failed or timed out), skipped (Redis marked down), invalid (not a record of this version).",
		}, []string{"kind", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.lookups, m.fetches, m.redisLookups)
	}
	m.hits = map[string]prometheus.Counter{
		"token":    m.lookups.WithLabelValues("token", "hit"),
		"contract": m.lookups.WithLabelValues("contract", "hit"),
	}
	return m
}

func (m *metrics) lookup(kind, result string) {
	if result == "hit" {
		m.hits[kind].Inc()
		return
	}
	m.lookups.WithLabelValues(kind, result).Inc()
}

func (m *metrics) redisLookup(kind, result string) {
	m.redisLookups.WithLabelValues(kind, result).Inc()
}

func (m *metrics) fetched(result string) { m.fetches.WithLabelValues(result).Inc() }
