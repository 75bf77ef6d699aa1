package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// codeLabels are the outcome label values: "ok", the documented error codes, "other".
var codeLabels = []string{"ok", "-32700", "-32600", "-32601", "-32602", "-32603", "-32000", "-32002", "-32003", "-32005", "-32011", "4100", "4901", "3", "other"}

const codeOther = 14

func codeIndex(err error) int {
	if err == nil {
		return 0
	}
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return 5 // internal: answered -32603
	}
	switch e.Code {
	case -32700:
		return 1
	case -32600:
		return 2
	case -32601:
		return 3
	case -32602:
		return 4
	case -32603:
		return 5
	case -32000:
		return 6
	case -32002:
		return 7
	case -32003:
		return 8
	case -32005:
		return 9
	case -32011:
		return 10
	case 4100:
		return 11
	case 4901:
		return 12
	case 3:
		return 13
	}
	return codeOther
}

// metrics are the request metrics. The series of each (route, method, code) are resolved
// once, on first use, into a table: WithLabelValues hashes and locks on every call.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	rest     *prometheus.CounterVec
	restDur  *prometheus.HistogramVec
	refused  *prometheus.CounterVec
	// refusedBudget counts the requests refused by the body budget.
	refusedBudget prometheus.Counter
	// The WebSocket series: sockets refused over maxConnsPerClient, subscriptions by kind,
	// messages written, sockets closed by the server by reason.
	wsRefused prometheus.Counter
	// Calls of sockets answered -32005 for the bytes queued: of the socket, of all sockets.
	wsQueueFull, wsQueuesBusy prometheus.Counter
	wsSubs                    []prometheus.Gauge
	wsOut                     prometheus.Counter
	wsDropped                 [dropReasons]prometheus.Counter

	// Sockets refused over maxConnsPerPrincipal and maxConnsPerAddress.
	wsRefusedPrincipal, wsRefusedAddr prometheus.Counter

	methods int
	table   []atomic.Pointer[series] // [route][method][code]
	restOK  []atomic.Pointer[series] // [route]: REST answers with HTTP 200
}

type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, routes int) (*metrics, error) {
	if reg == nil {
		return nil, errors.New("proxy: a metrics registry is required")
	}
	f := promauto.With(reg)
	methods := len(jsonrpc.MethodLabels()) + 1 // + "none", for requests refused before parsing
	return &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_rpc_requests_total",
			Help: "JSON-RPC calls answered, by route, method and outcome code (ok, a JSON-RPC error code, or other).",
		}, []string{"route", "method", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "web3gate_rpc_request_duration_seconds",
			Help:    "Time to answer a JSON-RPC call, by route and method.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
		rest: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_rest_requests_total",
			Help: "REST requests answered, by route and HTTP status.",
		}, []string{"route", "status"}),
		restDur: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "web3gate_rest_request_duration_seconds",
			Help:    "Time to answer a REST request, by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "web3gate_server_refused_total",
			Help: "Connections and requests refused by the server's limits, by reason: connections (server.maxConns), connections_per_address (server.maxConnsPerIP), body_budget (server.maxBodyBytesInFlight), websockets_per_client (server.websocket.maxConnsPerClient), websockets_per_principal (server.websocket.maxConnsPerPrincipal), websockets_per_address (server.websocket.maxConnsPerAddress), websocket_queue_bytes (calls answered -32005 over server.websocket.maxQueuedBytes), websocket_queue_total (over server.websocket.maxQueuedBytesTotal).",
		}, []string{"reason"}),
		methods: methods,
		table:   make([]atomic.Pointer[series], routes*methods*len(codeLabels)),
		restOK:  make([]atomic.Pointer[series], routes),
	}, nil
}

// gauges registers the gauges of s's limits, read when scraped.
func (m *metrics) gauges(reg prometheus.Registerer, s *Server) {
	f := promauto.With(reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "web3gate_server_open_connections",
		Help: "Open connections of the public listener.",
	}, func() float64 {
		if s.limits == nil {
			return 0
		}
		return float64(s.limits.count())
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "web3gate_server_body_bytes_in_flight",
		Help: "Bytes of the request bodies read as they arrive, held now (server.maxBodyBytesInFlight bounds them).",
	}, func() float64 { return float64(s.budget.used.Load()) })
	m.refusedBudget = m.refused.WithLabelValues("body_budget")
	m.wsRefused = m.refused.WithLabelValues("websockets_per_client")
	m.wsRefusedPrincipal = m.refused.WithLabelValues("websockets_per_principal")
	m.wsRefusedAddr = m.refused.WithLabelValues("websockets_per_address")
	m.wsQueueFull = m.refused.WithLabelValues("websocket_queue_bytes")
	m.wsQueuesBusy = m.refused.WithLabelValues("websocket_queue_total")
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "web3gate_websocket_queued_bytes",
		Help: "Bytes of the answers and notifications queued for WebSockets and not yet written (a notification shared by several sockets counts for each).",
	}, func() float64 {
		if s.ws == nil {
			return 0
		}
		return float64(s.ws.queuedBytes.Load())
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "web3gate_websocket_queued_answer_bytes",
		Help: "Bytes of the answers queued for WebSockets and not yet written (server.websocket.maxQueuedBytesTotal bounds them).",
	}, func() float64 {
		if s.ws == nil {
			return 0
		}
		return float64(s.ws.budget.used.Load())
	})
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "web3gate_websocket_connections",
		Help: "Open WebSockets of the public listener.",
	}, func() float64 {
		if s.ws == nil {
			return 0
		}
		return float64(s.ws.count())
	})
	subs := f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "web3gate_websocket_subscriptions",
		Help: "Open eth_subscribe subscriptions, by kind.",
	}, []string{"kind"})
	for _, k := range subscriptionKinds {
		m.wsSubs = append(m.wsSubs, subs.WithLabelValues(k))
	}
	m.wsOut = f.NewCounter(prometheus.CounterOpts{
		Name: "web3gate_websocket_messages_out_total",
		Help: "Messages written to WebSockets: answers and notifications.",
	})
	dropped := f.NewCounterVec(prometheus.CounterOpts{
		Name: "web3gate_websocket_dropped_total",
		Help: "WebSockets closed by the server, by reason: slow_consumer (queue full, server.websocket.queueSize or maxQueuedBytes), token_expired, message_too_large (server.websocket.maxMessageBytes), binary_message, idle (server.websocket.idleTimeout), ping_timeout (server.websocket.pingInterval), message_timeout (server.websocket.messageReadTimeout).",
	}, []string{"reason"})
	for i := 1; i < dropReasons; i++ {
		m.wsDropped[i] = dropped.WithLabelValues(dropLabels[i])
	}
}

// memoryFrees registers the counter of memFreer's runs.
func (m *metrics) memoryFrees(reg prometheus.Registerer) prometheus.Counter {
	return promauto.With(reg).NewCounter(prometheus.CounterOpts{
		Name: "web3gate_server_memory_frees_total",
		Help: "Times the memory freed after a drop of the bytes held by request bodies and WebSocket queues was returned to the operating system at once (server.freeMemoryAfterDrop).",
	})
}

// observe records one call of route; method "" is a request refused before it was parsed.
func (m *metrics) observe(route *Route, method string, err error, d time.Duration) {
	mi := len(jsonrpc.MethodLabels()) // "none"
	if method != "" {
		mi = jsonrpc.MethodIndex(method)
	}
	ci := codeIndex(err)
	slot := &m.table[(route.idx*m.methods+mi)*len(codeLabels)+ci]
	sr := slot.Load()
	if sr == nil {
		ml := "none"
		if mi < len(jsonrpc.MethodLabels()) {
			ml = jsonrpc.MethodLabels()[mi]
		}
		sr = &series{
			requests: m.requests.WithLabelValues(route.Name, ml, codeLabels[ci]),
			duration: m.duration.WithLabelValues(route.Name, ml),
		}
		slot.Store(sr)
	}
	sr.requests.Inc()
	sr.duration.Observe(d.Seconds())
}

// observeREST records one REST request. Statuses come from the handlers' own small set.
// Those of the 200s of each route are resolved once (a cached lookup is the hot path).
func (m *metrics) observeREST(route *Route, status int, d time.Duration) {
	if status != http.StatusOK {
		m.rest.WithLabelValues(route.Name, strconv.Itoa(status)).Inc()
		m.restDur.WithLabelValues(route.Name).Observe(d.Seconds())
		return
	}
	slot := &m.restOK[route.idx]
	sr := slot.Load()
	if sr == nil {
		sr = &series{requests: m.rest.WithLabelValues(route.Name, "200"), duration: m.restDur.WithLabelValues(route.Name)}
		slot.Store(sr)
	}
	sr.requests.Inc()
	sr.duration.Observe(d.Seconds())
}
