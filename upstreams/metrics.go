package upstreams

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// outcome is the result class of one upstream exchange: the `outcome` label of
// web3gate_upstream_requests_total. The set is fixed.
type outcome uint8

const (
	outcomeOK             outcome = iota // a result
	outcomeRPCError                      // a JSON-RPC error object: a valid answer
	outcomeTimeout                       // the attempt's deadline passed
	outcomeTransportError                // dial, write, read or connection closed
	outcomeHTTPError                     // HTTP 429, 5xx, or another non-2xx without a JSON-RPC error
	outcomeBadResponse                   // not a JSON-RPC response to our request, or too large
	outcomeCanceled                      // the caller's context was canceled
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"ok", "rpc_error", "timeout", "transport_error", "http_error", "bad_response", "canceled",
}

func (o outcome) String() string { return outcomeNames[o] }

// metrics are the collectors of one Set.
type metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	head      *prometheus.GaugeVec
	healthy   *prometheus.GaugeVec
	ejections *prometheus.CounterVec
	batches   *prometheus.CounterVec
	batched   *prometheus.CounterVec

	hedges      *prometheus.CounterVec
	logsSplit   *prometheus.CounterVec
	logsChunks  *prometheus.CounterVec
	logsHalving *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_requests_total",
			Help: "Requests sent to upstream nodes, by chain, node, method and outcome " +
				"(ok, rpc_error, timeout, transport_error, http_error, bad_response, canceled).",
		}, []string{"chain", "node", "method", "outcome"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "web3gate_upstream_request_duration_seconds",
			Help:    "Duration of requests to upstream nodes, by chain and node.",
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"chain", "node"}),
		head: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_upstream_head_block",
			Help: "Latest block number reported by each upstream node.",
		}, []string{"chain", "node"}),
		healthy: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "web3gate_upstream_healthy",
			Help: "1 when the upstream node is in rotation (right chain, not ejected, within maxLag), else 0.",
		}, []string{"chain", "node"}),
		ejections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_ejections_total",
			Help: "Times an upstream node was ejected after consecutive failures.",
		}, []string{"chain", "node"}),
		batches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_batches_total",
			Help: "JSON-RPC batches of queued calls sent to upstream nodes (upstreams.batch).",
		}, []string{"chain", "node"}),
		batched: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_batched_calls_total",
			Help: "Calls sent to upstream nodes inside those batches.",
		}, []string{"chain", "node"}),
		hedges: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_hedges_total",
			Help: "Hedged reads (upstreams.hedge), by chain and outcome: won (the second node's " +
				"answer was used), lost (the first node's answer, or neither), capped (due but " +
				"refused by hedge.maxExtra).",
		}, []string{"chain", "outcome"}),
		logsSplit: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_getlogs_split_total",
			Help: "eth_getLogs calls split into chunks (upstreams.getLogs), by chain.",
		}, []string{"chain"}),
		logsChunks: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_getlogs_chunks_total",
			Help: "Chunks of split eth_getLogs calls fetched from upstream nodes, by chain.",
		}, []string{"chain"}),
		logsHalving: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_upstream_getlogs_halvings_total",
			Help: "eth_getLogs ranges halved after a node refused them as too large, by chain.",
		}, []string{"chain"}),
	}
}

// nodeMetrics are one node's children of the vectors, resolved once. Request counters are
// resolved lazily per (method label, outcome) into copy-on-write maps, so the hot path does
// one map lookup and no allocation, and only series that happened are exported.
type nodeMetrics struct {
	vec      *prometheus.CounterVec
	chain    string
	node     string
	mu       sync.Mutex // serializes writers of counters
	counters [numOutcomes]atomic.Pointer[map[string]prometheus.Counter]

	duration  prometheus.Observer
	head      prometheus.Gauge
	healthy   prometheus.Gauge
	ejections prometheus.Counter
	batches   prometheus.Counter
	batched   prometheus.Counter
}

func (m *metrics) forNode(chain, node string) *nodeMetrics {
	return &nodeMetrics{
		vec:       m.requests,
		chain:     chain,
		node:      node,
		duration:  m.duration.WithLabelValues(chain, node),
		head:      m.head.WithLabelValues(chain, node),
		healthy:   m.healthy.WithLabelValues(chain, node),
		ejections: m.ejections.WithLabelValues(chain, node),
		batches:   m.batches.WithLabelValues(chain, node),
		batched:   m.batched.WithLabelValues(chain, node),
	}
}

// batch counts one batch of size queued calls.
func (nm *nodeMetrics) batch(size int) {
	nm.batches.Inc()
	nm.batched.Add(float64(size))
}

// request counts one exchange. method must be a jsonrpc.MethodLabel value.
func (nm *nodeMetrics) request(method string, o outcome) {
	if mp := nm.counters[o].Load(); mp != nil {
		if c, ok := (*mp)[method]; ok {
			c.Inc()
			return
		}
	}
	nm.mu.Lock()
	old := nm.counters[o].Load()
	c, ok := prometheus.Counter(nil), false
	if old != nil {
		c, ok = (*old)[method]
	}
	if !ok {
		c = nm.vec.WithLabelValues(nm.chain, nm.node, method, o.String())
		next := make(map[string]prometheus.Counter, 8)
		if old != nil {
			for k, v := range *old {
				next[k] = v
			}
		}
		next[method] = c
		nm.counters[o].Store(&next)
	}
	nm.mu.Unlock()
	c.Inc()
}
