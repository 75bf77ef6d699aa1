package wallet

// The signing metrics (web3gate_sign_*), by backend.

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type signMetrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

func newSignMetrics(reg prometheus.Registerer) *signMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // not exported: tests and tools without a registry
	}
	f := promauto.With(reg)
	return &signMetrics{
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "web3gate_sign_duration_seconds",
			Help:    "Time to sign one digest (a transaction, a message, typed data), by key backend: keystore, pkcs11, awskms; failures included.",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}},
			[]string{"backend"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_sign_errors_total",
			Help: "Signatures that failed, by key backend and reason: unavailable (the backend is down, slow or its token gone: retryable), bad_signature (a signature that did not recover to the account, never used), error (any other: a key missing or refused)."},
			[]string{"backend", "reason"}),
	}
}

// init creates backend's series at 0, so that they are exported before the first signature.
func (m *signMetrics) init(backend string) {
	m.duration.WithLabelValues(backend)
	for _, r := range []string{"unavailable", "bad_signature", "error"} {
		m.errors.WithLabelValues(backend, r)
	}
}

func (m *signMetrics) observe(backend string, start time.Time) {
	m.duration.WithLabelValues(backend).Observe(time.Since(start).Seconds())
}

func (m *signMetrics) fail(backend string, err error) {
	reason := "error"
	switch {
	case errors.Is(err, ErrSignerUnavailable), errors.Is(err, context.DeadlineExceeded):
		reason = "unavailable"
	case errors.Is(err, ErrBadSignature):
		reason = "bad_signature"
	}
	m.errors.WithLabelValues(backend, reason).Inc()
}
