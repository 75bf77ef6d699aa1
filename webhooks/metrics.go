package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Outcomes of a delivery attempt (label outcome).
const (
	outcomeDelivered = "delivered"
	outcomeFailed    = "failed" // to be tried again
	outcomeDead      = "dead"   // the last attempt failed
)

type metrics struct {
	deliveries *prometheus.CounterVec
	lag        prometheus.Histogram
	pending    prometheus.Gauge
	pruned     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		deliveries: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered (2xx), failed (tried again later), dead (the last of webhooks.maxAttempts failed)."},
			[]string{"outcome"}),
		lag: f.NewHistogram(prometheus.HistogramOpts{Name: "web3gate_webhook_delivery_lag_seconds",
			Help:    "Time from a transaction's state change to its webhook's delivery (2xx), retries included.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600}}),
		pending: f.NewGauge(prometheus.GaugeOpts{Name: "web3gate_webhook_pending",
			Help: "Webhook deliveries waiting (pending, to enabled endpoints), as the replica delivering them last read; 0 on the others."}),
		pruned: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_webhook_pruned_total",
			Help: "Rows deleted by webhooks.retention: finished deliveries (table deliveries) and the events no delivery refers to any more (table events)."},
			[]string{"table"}),
	}
	for _, tb := range []string{"deliveries", "events"} {
		m.pruned.WithLabelValues(tb)
	}
	for _, o := range []string{outcomeDelivered, outcomeFailed, outcomeDead} {
		m.deliveries.WithLabelValues(o)
	}
	return m
}
