// The request log: one line for each request that fails, and a sample of those that succeed.

package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/web3gate/web3gate/internal/logx"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// RequestLogConfig is `log.requests`: the request log.
type RequestLogConfig struct {
	// SampleSuccess is the share of the successful requests logged, 0 (none, the default) to
	// 1 (all). Failed requests are always logged (within log.flood).
	SampleSuccess float64 `yaml:"sampleSuccess"`
}

// Validate checks c; each message names its key within the section.
func (c *RequestLogConfig) Validate() error {
	if !(c.SampleSuccess >= 0 && c.SampleSuccess <= 1) {
		return errors.New("sampleSuccess: must be between 0 and 1")
	}
	return nil
}

// The messages of the request log's lines.
const (
	msgRequestFailed = "request failed"
	msgRequest       = "request"
)

// loggedCalls is how many methods, and error codes, of a batch a line lists; it says how
// many there were in all.
const loggedCalls = 10

// reqRecord is what the request log keeps of one HTTP request or WebSocket message, filled
// in as it is served. It lives on the stack of the request's handler: nothing of it is
// allocated unless a line is written.
type reqRecord struct {
	reqID string // set by logRequest, a copy, when a line is written
	// client is the client id the auth stage verified (one of auth.clients; an unknown one is
	// not kept: it may be a secret pasted in the wrong place); principal the bearer token's
	// subject.
	client, principal string
	websocket         bool   // a WebSocket message; status is then 0
	socket            string // a WebSocket message's: the request id of its socket's upgrade
	upgrade           bool   // a WebSocket upgrade that succeeded (101)

	calls   int // JSON-RPC calls (a batch's elements)
	batch   bool
	methods [loggedCalls]string
	failed  int // calls answered with an error, or 1 for a request answered whole with one
	codes   [loggedCalls]int
	worst   int    // the highest HTTP status of the errors
	msg     string // the first error's message

	trace *reqTrace // the request's tracing; nil: not traced (trace.go)
}

// call records one JSON-RPC call of method, answered with e (nil: a result).
func (r *reqRecord) call(method string, e *jsonrpc.Error) {
	if r.calls < loggedCalls {
		r.methods[r.calls] = method
	}
	r.calls++
	if e != nil {
		r.fail(e)
	}
}

// fail records an error answer: of one call, or of the whole request.
func (r *reqRecord) fail(e *jsonrpc.Error) {
	if r.failed < loggedCalls {
		r.codes[r.failed] = e.Code
	}
	if r.failed == 0 {
		r.msg = e.Message
	}
	r.failed++
	r.worst = max(r.worst, e.Status())
}

// principalOf records who the exchange's calls acted for: what the auth stage verified of
// its credentials (nothing when it refused an unknown client id).
func (r *reqRecord) principalOf(ex *Exchange) {
	r.client, r.principal = ex.principal.ClientID, ex.principal.ID
}

// logRequest writes the request log's line of the request reqID of route (nil: none
// matched) that was answered with status (0: a WebSocket message), begun at start: one line
// when it failed (an HTTP status of 400 or more, or a JSON-RPC error in its answer), bounded
// per route and outcome by log.flood; else one line for a share log.requests.sampleSuccess
// of the requests. reqID is copied only when a line is written: it may be on the caller's
// stack.
func (s *Server) logRequest(rec *reqRecord, reqID []byte, route *Route, status int, start time.Time) {
	if status < http.StatusBadRequest && rec.failed == 0 {
		if s.sample > 0 && rand.Float64() < s.sample {
			rec.reqID = string(reqID)
			s.writeRequestLine(s.log.Check(zapcore.InfoLevel, msgRequest), rec, route, status, start)
		}
		return
	}
	rec.reqID = string(reqID)
	lvl := zapcore.InfoLevel
	if max(status, rec.worst) >= http.StatusInternalServerError {
		lvl = zapcore.WarnLevel
	}
	name := "none"
	if route != nil {
		name = route.Name
	}
	reason := strconv.Itoa(status)
	if rec.failed > 0 {
		reason += "/" + strconv.Itoa(rec.codes[0])
	}
	s.writeRequestLine(s.flood.Check(s.log, lvl, msgRequestFailed, name, reason), rec, route, status, start)
}

func (s *Server) writeRequestLine(ce *zapcore.CheckedEntry, rec *reqRecord, route *Route, status int, start time.Time) {
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 12)
	fields = append(fields, zap.String("req_id", rec.reqID))
	if route != nil {
		fields = append(fields, zap.String("route", route.Name))
	}
	switch {
	case rec.websocket:
		fields = append(fields, zap.Bool("websocket", true), zap.String("socket", rec.socket))
	case rec.upgrade:
		fields = append(fields, zap.Int("status", http.StatusSwitchingProtocols), zap.Bool("websocket", true))
	default:
		fields = append(fields, zap.Int("status", status))
	}
	if rec.client != "" {
		fields = append(fields, zap.String("client", ClientFingerprint(rec.client)))
	}
	if rec.principal != "" {
		fields = append(fields, zap.String("principal", rec.principal))
	}
	switch {
	case rec.batch:
		methods := make([]string, min(rec.calls, loggedCalls))
		for i := range methods {
			methods[i] = truncate(rec.methods[i], 64)
		}
		fields = append(fields, zap.Strings("methods", methods), zap.Int("calls", rec.calls))
	case rec.calls == 1:
		fields = append(fields, zap.String("method", truncate(rec.methods[0], 64)))
	}
	switch {
	case rec.batch && rec.failed > 0:
		codes := append([]int(nil), rec.codes[:min(rec.failed, loggedCalls)]...) // rec stays on its stack
		fields = append(fields, zap.Ints("codes", codes), zap.Int("failed", rec.failed))
	case rec.failed > 0:
		fields = append(fields, zap.Int("code", rec.codes[0]))
	}
	if rec.msg != "" {
		fields = append(fields, zap.String("error", truncate(rec.msg, 200)))
	}
	fields = append(fields, zap.Duration("took", time.Since(start)))
	ce.Write(fields...)
}

// newFlood is Deps.Flood, or a bound of the defaults.
func newFlood(l *logx.Limiter) *logx.Limiter {
	if l != nil {
		return l
	}
	return logx.New(logx.Config{}, nil)
}

// ClientFingerprint is how the logs name a client id: the first 16 hex digits of its
// SHA-256. A client id in a wallet's URL works as an API key for reads, so the id itself is
// never logged; its fingerprint tells the lines of one client apart from another's, and an
// operator finds whose it is with `printf %s ID | sha256sum | cut -c1-16`.
func ClientFingerprint(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:8])
}
