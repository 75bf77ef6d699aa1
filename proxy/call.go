// Package proxy is web3gate's request pipeline: the fasthttp server, the Call that flows
// through the stages, the stage and handler shapes, route compilation and the one writer that
// turns any error into the wire form.
package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Call is one JSON-RPC request flowing through the compiled chain of stages. The calls of a
// batch share one Exchange.
type Call struct {
	Ctx      context.Context
	Exchange *Exchange
	Route    *Route
	ChainID  uint64 // the chain of the path, with "mainnet" resolved
	Request  jsonrpc.Request

	// Principal is set by the auth stage.
	Principal *Principal
}

// Method is the JSON-RPC method of c.
func (c *Call) Method() string { return c.Request.Method }

// FeeBump is the X-Fee-Bump header of an eth_sendTransaction request: whether web3gate may
// re-sign the transaction with raised fees (wallet.transactions.bump).
type FeeBump uint8

const (
	FeeBumpUnset   FeeBump = iota // no header: the configuration decides
	FeeBumpAllow                  // "allow"
	FeeBumpDeny                   // "deny"
	FeeBumpInvalid                // anything else
)

// Exchange is one HTTP request as the stages see it. Its fields are copies: nothing in it
// aliases fasthttp's buffers.
type Exchange struct {
	RequestID string
	// ClientID is the X-API-Key header, or else the client id of the URL (the route's
	// {client_id} segment or the apiKey query parameter); empty when absent. In a URL it
	// works as an API key: never log it.
	ClientID string
	Bearer   string // the bearer token of the Authorization header, empty when absent; never log it
	// BadAuthHeader is set when an Authorization header was sent but is not "Bearer <token>".
	BadAuthHeader bool
	// ClientIDConflict is set when the header and the URL, or the URL's path and query,
	// carry different client ids.
	ClientIDConflict bool
	// IdempotencyKey is the Idempotency-Key header (HasIdempotencyKey: it was sent, even empty).
	IdempotencyKey    string
	HasIdempotencyKey bool
	// FeeBump is what the X-Fee-Bump header said.
	FeeBump FeeBump
	// Batch is set when the body was a batch: its calls share the exchange.
	Batch bool
	Start time.Time
	// Socket is the WebSocket connection the message came on; nil over HTTP.
	Socket Socket

	authOnce  sync.Once
	principal Principal
	fatal     error

	// Limit is what a rate-limit stage reported of the exchange's budget (Exchange.Charge):
	// the writer sends it in the RateLimit-* headers (and Retry-After when refused) of an HTTP
	// answer. Zero: no limit applied.
	Limit      LimitInfo
	chargeOnce sync.Once
	charged    error

	single Call            // the call of a non-batch request, allocated with the exchange
	msg    jsonrpc.Message // the parsed body
	// queueRefused is the socket's refusal (-32005) of an answer that would not fit its
	// queue (see socket.roomFor), answered in its place; nil: none.
	queueRefused *jsonrpc.Error
	trace        *reqTrace // the request's tracing; nil: not traced (trace.go)

	// inline holds the copy of a small body and the strings above (newExchange): an
	// eth_getBalance or a short eth_call with its headers fits. Its length makes the exchange
	// fill a size class of the allocator, so nothing is wasted (TestExchangeSize; see
	// docs/performance.md, "Notes from the code", proxy).
	inline [176]byte
}

// Authenticate runs verify once per exchange, on a principal the exchange holds, and
// returns its outcome to every call of the exchange. An error from verify answers the whole
// HTTP request: a batch gets one error object, not one per element.
func (e *Exchange) Authenticate(v Verifier) (*Principal, error) {
	e.authOnce.Do(func() {
		if e.trace != nil {
			e.fatal = e.trace.exchangeStage("auth", func() error { return v.VerifyExchange(e, &e.principal) })
			return
		}
		e.fatal = v.VerifyExchange(e, &e.principal)
	})
	if e.fatal != nil {
		return nil, e.fatal
	}
	return &e.principal, nil
}

// Charge runs ch once per exchange, on the call that comes first (the calls of an exchange
// share its client and principal), and returns its outcome to every call of the exchange: a
// batch is charged once, for all of its calls, and refused whole.
func (e *Exchange) Charge(ch Charger, c *Call) error {
	if e.trace != nil {
		e.chargeOnce.Do(func() { e.charged = e.trace.exchangeStage("ratelimit", func() error { return ch.ChargeExchange(c) }) })
		return e.charged
	}
	if !e.Batch {
		// Its one call: nothing to share, and no lock to take.
		e.charged = ch.ChargeExchange(c)
		return e.charged
	}
	e.chargeOnce.Do(func() { e.charged = ch.ChargeExchange(c) })
	return e.charged
}

// Charger charges the exchange of a call to a budget (a rate-limit stage), filling in its
// Limit.
type Charger interface {
	ChargeExchange(c *Call) error
}

// Refused is the error Charge returned, if any: it answers every call of the exchange.
func (e *Exchange) Refused() error { return e.charged }

// Requests are the requests of the exchange, a batch's elements in order (those with
// Invalid set are answered with that error and never served).
func (e *Exchange) Requests() []jsonrpc.Request { return e.msg.Requests }

// LimitInfo is an exchange's budget as a rate limit reports it in the IETF draft's
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset headers, in whole units and
// seconds. Limit 0: none applied.
type LimitInfo struct {
	Limit      uint32 // the burst: the most the budget holds
	Remaining  uint32 // left once the exchange is charged (refused: left without it)
	Reset      uint32 // seconds until the budget is full again
	RetryAfter uint32 // refused: seconds until the exchange would be allowed; 0 when allowed
}

// Verifier authenticates an exchange, filling in its principal.
type Verifier interface {
	VerifyExchange(e *Exchange, p *Principal) error
}

// Fatal is the error that answers the whole exchange, if any.
func (e *Exchange) Fatal() error { return e.fatal }

// Principal is who a request acts for.
type Principal struct {
	ID       string // empty when only the client id was verified
	ClientID string
	// Scopes are the access token's scopes (static tokens: all of them); read-only.
	Scopes []string
	// Expires is when the access token expires (its exp claim); zero when it does not (static
	// tokens, a client id alone). A WebSocket is closed when it passes.
	Expires time.Time
}

// Authenticated reports whether a bearer token identified a principal.
func (p *Principal) Authenticated() bool { return p != nil && p.ID != "" }

// Response is a successful answer: the raw JSON result.
type Response struct {
	Result []byte
}

// Handler serves a call.
type Handler interface {
	Serve(c *Call) (*Response, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *Call) (*Response, error)

// Serve implements Handler.
func (f HandlerFunc) Serve(c *Call) (*Response, error) { return f(c) }

// Stage is one step of the pipeline: it may answer, pass on to next, or wrap next.
// Stages return errors; they never write to the connection.
type Stage interface {
	Serve(c *Call, next Handler) (*Response, error)
}

// Compile chains stages in front of terminal, back to front, once at start-up.
func Compile(terminal Handler, stages ...Stage) Handler {
	h := terminal
	for i := len(stages) - 1; i >= 0; i-- {
		h = &link{stage: stages[i], next: h}
	}
	return h
}

type link struct {
	stage Stage
	next  Handler
}

func (l *link) Serve(c *Call) (*Response, error) { return l.stage.Serve(c, l.next) }
