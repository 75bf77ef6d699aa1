package proxy

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, errors.New("proxy: a metrics registry is required")
	}
	f := promauto.With(reg)
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
	}, nil
}

func codeLabel(err error) string {
	if err == nil {
		return "ok"
	}
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return "-32603"
	}
	switch e.Code {
	case -32700, -32600, -32601, -32602, -32603, -32000, -32002, -32003, -32005, -32011, 4100, 4901, 3:
		return strconv.Itoa(e.Code)
	}
	return "other"
}

func (m *metrics) observe(route, method string, err error, _ *Response, d time.Duration) {
	ml := "none"
	if method != "" {
		ml = jsonrpc.MethodLabel(method)
	}
	m.requests.WithLabelValues(route, ml, codeLabel(err)).Inc()
	m.duration.WithLabelValues(route, ml).Observe(d.Seconds())
}
