// Request ids: the ones the server makes, the check of one a client sends, and the contexts
// that carry one to the stages, the upstream pools and the nonce manager.

package proxy

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// appendRequestID appends a new request id to dst: the process's random prefix and a
// sequence number.
func (s *Server) appendRequestID(dst []byte) []byte {
	dst = append(dst, s.idPrefix...)
	return strconv.AppendUint(dst, s.idSeq.Add(1), 36)
}

// maxRequestIDLen bounds the X-Request-Id a client sends; a longer one is replaced.
const maxRequestIDLen = 128

// validRequestID reports whether a client's X-Request-Id may be kept: 1 to 128 characters
// of A-Z a-z 0-9 - _ . : (a UUID, a trace id, a load balancer's unique id). Anything else
// is replaced by one of the server's, so that a log line never carries what a client
// smuggled into it.
func validRequestID[T string | []byte](v T) bool {
	if len(v) == 0 || len(v) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// ValidRequestID is validRequestID for the admin listener's handlers (net/http).
func ValidRequestID(v string) bool { return validRequestID(v) }

// HTTPRequestID is the request id of r for a net/http handler of the admin listener: the one
// its context carries (given by the listener), else the caller's X-Request-Id when valid,
// else newID().
func HTTPRequestID(r *http.Request, newID func() string) string {
	if id := RequestID(r.Context()); id != "" {
		return id
	}
	if id := r.Header.Get("X-Request-Id"); validRequestID(id) {
		return id
	}
	return newID()
}

var headerRequestID = []byte("X-Request-Id")

// requestIDKey is the context key of a request id.
type requestIDKey struct{}

// RequestID is the request id ctx carries: that of the request a call's context (Call.Ctx,
// RESTRequest.Ctx, and every context made from them) belongs to; "" when none (a poller's,
// a background job's).
func RequestID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithRequestID returns ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// exchangeContext is the context of an exchange's calls: the exchange itself, seen as a
// context that is never canceled (as context.Background) and carries the request id.
// Being the exchange, it costs no allocation; being never canceled, it lets the upstream
// pool make its requests inline, without a goroutine each (see Server.ctx).
type exchangeContext Exchange

// context is ex's calls' context.
func (ex *Exchange) context() context.Context { return (*exchangeContext)(ex) }

func (*exchangeContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*exchangeContext) Done() <-chan struct{}       { return nil }
func (*exchangeContext) Err() error                  { return nil }

func (c *exchangeContext) Value(key any) any {
	if _, ok := key.(requestIDKey); ok {
		return c.RequestID
	}
	if c.trace != nil {
		return c.trace.ctx.Value(key) // the server span (trace.go)
	}
	return nil
}

func (c *exchangeContext) String() string { return "proxy.exchangeContext" }

// RequestIDField is the log field req_id of the request ctx carries (RequestID), or no field
// when it carries none: the lines of a poller or a background job have no req_id.
func RequestIDField(ctx context.Context) zap.Field {
	if id := RequestID(ctx); id != "" {
		return zap.String("req_id", id)
	}
	return zap.Skip()
}
