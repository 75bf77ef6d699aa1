package txmgr

// The metrics of fee bumping and of mined transactions (web3gate_tx_*).

import (
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/web3gate/web3gate/store"
)

// bumpMetrics are the fee bumping's metrics.
type bumpMetrics struct {
	bumps     *prometheus.CounterVec
	replaced  *prometheus.CounterVec
	stuck     *prometheus.CounterVec
	cancelled *prometheus.CounterVec
	toMined   *prometheus.HistogramVec
	reverted  *prometheus.CounterVec
	open      *prometheus.GaugeVec
}

func newBumpMetrics(reg prometheus.Registerer) *bumpMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // not exported: tests and tools without a registry
	}
	f := promauto.With(reg)
	return &bumpMetrics{
		bumps: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_bumps_total",
			Help: "Versions signed after a transaction's original: reason auto (the confirmer's bump), speedup or cancel."}, []string{"chain", "reason"}),
		replaced: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_replaced_total",
			Help: "Transaction versions replaced: another version of the same request was mined."}, []string{"chain"}),
		stuck: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_stuck_total",
			Help: "Transactions that became stuck: the next bump would pass maxFeeCap, a signing rule or the funds."}, []string{"chain"}),
		cancelled: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_cancelled_total",
			Help: "Transactions whose cancel version was mined."}, []string{"chain"}),
		reverted: f.NewCounterVec(prometheus.CounterOpts{Name: "web3gate_tx_reverted_total",
			Help: "Transactions mined with receipt status 0 (reverted), recorded failed with their revert reason."}, []string{"chain"}),
		toMined: f.NewHistogramVec(prometheus.HistogramOpts{Name: "web3gate_tx_time_to_mined_seconds",
			Help:    "From a transaction's recording (just before its first broadcast) to the block scan that found it mined.",
			Buckets: []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600}}, []string{"chain"}),
		open: f.NewGaugeVec(prometheus.GaugeOpts{Name: "web3gate_tx_open",
			Help: "Transactions not settled yet, by chain and state (reserved, signed, handed_out, broadcast, stuck, mined), as the chain's confirmer counted them at its last pass; 0 on the replicas not holding its lease."}, []string{"chain", "state"}),
	}
}

// initChains creates the series of chains, at 0: they are exported before their first event.
func (m *bumpMetrics) initChains(chains []uint64) {
	for _, id := range chains {
		label := chainLabel(id)
		for _, r := range []string{"auto", "speedup", "cancel"} {
			m.bumps.WithLabelValues(label, r)
		}
		m.replaced.WithLabelValues(label)
		m.stuck.WithLabelValues(label)
		m.cancelled.WithLabelValues(label)
		m.reverted.WithLabelValues(label)
		m.toMined.WithLabelValues(label)
		m.setOpen(id, nil)
	}
}

// setOpen sets chainID's web3gate_tx_open gauges to counts (store.OpenStates; nil: all 0).
func (m *bumpMetrics) setOpen(chainID uint64, counts map[string]int) {
	label := chainLabel(chainID)
	for _, st := range store.OpenStates {
		m.open.WithLabelValues(label, st).Set(float64(counts[st]))
	}
}

func chainLabel(id uint64) string { return strconv.FormatUint(id, 10) }

// countSettled counts the metrics of rec settled by the version with hash mined.
func (t *Manager) countSettled(rec *store.TxRecord, vs []*store.TxVersion, mined common.Hash) {
	label := chainLabel(rec.ChainID)
	if len(vs) > 0 {
		t.metrics.replaced.WithLabelValues(label).Add(float64(len(vs)))
	}
	for _, v := range vs {
		if v.Hash == mined && v.Kind == store.VersionCancel {
			t.metrics.cancelled.WithLabelValues(label).Inc()
		}
	}
}

// observeMined counts the requests the block scan found mined.
func (t *Manager) observeMined(chainID uint64, mined []store.Mined) {
	if len(mined) == 0 {
		return
	}
	label := chainLabel(chainID)
	now := time.Now()
	for _, m := range mined {
		t.metrics.toMined.WithLabelValues(label).Observe(now.Sub(m.CreatedAt).Seconds())
		if m.Versions > 0 {
			t.metrics.replaced.WithLabelValues(label).Add(float64(m.Versions))
		}
		if m.State == store.StateCancelled {
			t.metrics.cancelled.WithLabelValues(label).Inc()
		}
	}
}
