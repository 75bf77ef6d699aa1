package owners

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	indexed *prometheus.GaugeVec
	lag     *prometheus.GaugeVec
	logs    *prometheus.CounterVec
	reorgs  *prometheus.CounterVec
	rolled  *prometheus.CounterVec
	splits  *prometheus.CounterVec
	errors  *prometheus.CounterVec
	fetch   *prometheus.HistogramVec
	write   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		indexed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_owners_indexed_block",
			Help: "The last block whose NFT transfer logs the owners index has applied, by chain.",
		}, []string{"chain"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_owners_lag_blocks",
			Help: "Blocks between the chain's head and the owners index (confirmations included), by chain.",
		}, []string{"chain"}),
		logs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_owners_logs_total",
			Help: "Logs ingested by the owners index, by chain and kind: erc721, erc1155_single, erc1155_batch, malformed (skipped: not as the standard writes it), ignored (ERC20 Transfer and other events).",
		}, []string{"chain", "kind"}),
		reorgs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_owners_reorgs_total",
			Help: "Reorgs the owners index met, by chain and action: rolled_back (undone exactly), reindexed (deeper than reorgDepth: the chain's index rebuilt).",
		}, []string{"chain", "action"}),
		rolled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_owners_rolled_back_blocks_total",
			Help: "Indexed blocks undone by reorgs, by chain.",
		}, []string{"chain"}),
		splits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_owners_range_splits_total",
			Help: "eth_getLogs block ranges halved after a node refused them (too many results, range or response too large, timeout), by chain.",
		}, []string{"chain"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_owners_errors_total",
			Help: "Failed rounds of the owners index (node or store errors; each is retried with backoff), by chain.",
		}, []string{"chain"}),
		fetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "web3gate_owners_fetch_duration_seconds",
			Help:    "Time to read one block range from the chain (eth_getLogs with its headers, one round trip, parsed), by chain.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"chain"}),
		write: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "web3gate_owners_write_duration_seconds",
			Help:    "Time to apply one block range to the store (one transaction, committed), by chain.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.indexed, m.lag, m.logs, m.reorgs, m.rolled, m.splits, m.errors, m.fetch, m.write)
	}
	return m
}

// chainMetrics are the metrics of one chain, resolved once.
type chainMetrics struct {
	indexed, lag          prometheus.Gauge
	logs                  [numKinds]prometheus.Counter
	rolledBack, reindexed prometheus.Counter
	rolledBlocks          prometheus.Counter
	splits, errors        prometheus.Counter
	fetch, write          prometheus.Observer
}

func (m *metrics) chain(name string) *chainMetrics {
	c := &chainMetrics{
		indexed:      m.indexed.WithLabelValues(name),
		lag:          m.lag.WithLabelValues(name),
		rolledBack:   m.reorgs.WithLabelValues(name, "rolled_back"),
		reindexed:    m.reorgs.WithLabelValues(name, "reindexed"),
		rolledBlocks: m.rolled.WithLabelValues(name),
		splits:       m.splits.WithLabelValues(name),
		errors:       m.errors.WithLabelValues(name),
		fetch:        m.fetch.WithLabelValues(name),
		write:        m.write.WithLabelValues(name),
	}
	for k := range c.logs {
		c.logs[k] = m.logs.WithLabelValues(name, kindNames[k])
	}
	return c
}
