package feeds

import "github.com/prometheus/client_golang/prometheus"

// metrics are the web3gate_feed_* metrics; label values are chain names and the three
// upstream methods.
type metrics struct {
	head, headSeen, delivered, lag, sinks *prometheus.GaugeVec
	reorgs                                *prometheus.CounterVec
	calls                                 *prometheus.CounterVec
	pushUp                                *prometheus.GaugeVec
	pushed, lagPolls                      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		head: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_feed_head_block",
			Help: "The latest block number the chain's feed has seen, by chain.",
		}, []string{"chain"}),
		headSeen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_feed_head_seen_timestamp_seconds",
			Help: "Unix time at which the chain's feed first saw its latest head (web3gate_feed_head_block), by chain.",
		}, []string{"chain"}),
		delivered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_feed_delivered_block",
			Help: "The number of the last block the chain's feed delivered to its subscribers, by chain.",
		}, []string{"chain"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_feed_lag_blocks",
			Help: "Blocks between the head the chain's feed has seen and the last it delivered, by chain.",
		}, []string{"chain"}),
		sinks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_feed_sinks",
			Help: "Consumers (WebSocket subscriptions) of the chain's feed, by chain.",
		}, []string{"chain"}),
		reorgs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_feed_reorgs_total",
			Help: "Reorgs the chain's feed delivered (removed blocks, then the new branch), by chain.",
		}, []string{"chain"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_feed_upstream_calls_total",
			Help: "JSON-RPC calls the chain's feed and its filter polls sent to the upstream pool (each call of a batch counts), by chain and method.",
		}, []string{"chain", "method"}),
		pushUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_feed_push_up",
			Help: "1 while the chain's feed has a node's WebSocket subscribed to newHeads (it takes pushed heads instead of polling), else 0, by chain.",
		}, []string{"chain"}),
		pushed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_feed_pushed_heads_total",
			Help: "Heads a node pushed to the chain's feed (newHeads over upstreams.chains[].wsUrls), by chain.",
		}, []string{"chain"}),
		lagPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_feed_push_lag_polls_total",
			Help: "Polls of the chain's feed while its push socket was up, because the upstream pool's head stayed above the delivered block for feeds.pollInterval (the socket's node lags; the socket moves to the next wsUrl), by chain.",
		}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.head, m.headSeen, m.delivered, m.lag, m.sinks, m.reorgs, m.calls, m.pushUp, m.pushed, m.lagPolls)
	}
	return m
}

// chainMetrics are one chain's metrics, resolved once.
type chainMetrics struct {
	head, headSeen, delivered, lag, sinks prometheus.Gauge
	reorgs                                prometheus.Counter
	byNumber, byHash, logs                prometheus.Counter
	pushUp                                prometheus.Gauge
	pushed, lagPolls                      prometheus.Counter
}

func (m *metrics) chain(name string) *chainMetrics {
	return &chainMetrics{
		head:      m.head.WithLabelValues(name),
		headSeen:  m.headSeen.WithLabelValues(name),
		delivered: m.delivered.WithLabelValues(name),
		lag:       m.lag.WithLabelValues(name),
		sinks:     m.sinks.WithLabelValues(name),
		reorgs:    m.reorgs.WithLabelValues(name),
		byNumber:  m.calls.WithLabelValues(name, methodBlockByNumber),
		byHash:    m.calls.WithLabelValues(name, methodBlockByHash),
		logs:      m.calls.WithLabelValues(name, methodGetLogs),
		pushUp:    m.pushUp.WithLabelValues(name),
		pushed:    m.pushed.WithLabelValues(name),
		lagPolls:  m.lagPolls.WithLabelValues(name),
	}
}

// call counts one upstream call of method.
func (c *chainMetrics) call(method string) {
	switch method {
	case methodBlockByNumber:
		c.byNumber.Inc()
	case methodBlockByHash:
		c.byHash.Inc()
	case methodGetLogs:
		c.logs.Inc()
	}
}
