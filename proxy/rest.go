package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// RESTHandler serves a REST route.
type RESTHandler interface {
	ServeREST(r *RESTRequest) (*RESTResponse, error)
}

// RESTHandlerFunc adapts a function to RESTHandler.
type RESTHandlerFunc func(r *RESTRequest) (*RESTResponse, error)

// ServeREST implements RESTHandler.
func (f RESTHandlerFunc) ServeREST(r *RESTRequest) (*RESTResponse, error) { return f(r) }

// RESTRequest is one REST request as a handler sees it. Body and the values it returns are
// copies: they may be kept.
type RESTRequest struct {
	Ctx       context.Context
	RequestID string
	Method    string
	Params    Params // path parameters
	Body      []byte
	// RemoteAddr is the TCP peer (the client, or the proxy in front of web3gate).
	RemoteAddr net.Addr

	args    *fasthttp.Args
	header  *fasthttp.RequestHeader
	resp    *fasthttp.ResponseHeader
	trusted []netip.Prefix // server.trustedProxies
}

// SetLimit sets the RateLimit-* headers of l (and Retry-After when l refused) on the answer,
// whatever it is: a rate limit in front of the handler reports the budget on every answer.
func (r *RESTRequest) SetLimit(l LimitInfo) {
	if r.resp != nil {
		writeLimit(r.resp, &l)
	}
}

// SourceIP is the address the request came from: the TCP peer's, or, when the peer is one of
// server.trustedProxies, the right-most address of the X-Forwarded-For headers that is not
// (see ForwardedFor).
func (r *RESTRequest) SourceIP() netip.Addr {
	if r.header == nil || len(r.trusted) == 0 {
		return peerAddr(r.RemoteAddr)
	}
	return ForwardedFor(peerAddr(r.RemoteAddr), r.trusted, r.header.PeekAll("X-Forwarded-For"))
}

// Exchange returns the request's credentials as an exchange, for Exchange.Authenticate.
func (r *RESTRequest) Exchange() *Exchange {
	var h reqHeaders
	h.read(r.header)
	ex, _ := newExchange(nil, false, nil, &h, time.Now())
	ex.RequestID = r.RequestID
	return ex
}

// Header returns a request header's value, "" when absent.
func (r *RESTRequest) Header(name string) string { return string(r.header.Peek(name)) }

// Query returns the first value of a query parameter (fasthttp's Args.Peek) and whether it
// was present.
func (r *RESTRequest) Query(name string) (string, bool) {
	if !r.args.Has(name) {
		return "", false
	}
	return string(r.args.Peek(name)), true
}

// QueryBool reads the boolean query parameter name by the one rule of every REST route:
// "true" or "false" in any letter case; absent or empty counts as absent (ok false); any
// other value ("1", "t", "yes") is a 400 "<name>: must be true or false". q is a
// *RESTRequest, or any source of query values (tests, fuzz targets).
func QueryBool(q interface{ Query(string) (string, bool) }, name string) (v, ok bool, err error) {
	s, present := q.Query(name)
	switch {
	case !present || s == "":
		return false, false, nil
	case strings.EqualFold(s, "true"):
		return true, true, nil
	case strings.EqualFold(s, "false"):
		return false, true, nil
	}
	return false, false, Errorf(http.StatusBadRequest, "%s: must be true or false", name)
}

// QueryList returns every value of an array query parameter in the three encodings clients
// use: repeated keys (a=1&a=2), comma lists (a=1,2) and bracket keys (a[]=1&a[]=2). Empty
// items are dropped.
func (r *RESTRequest) QueryList(name string) []string {
	var out []string
	add := func(v []byte) {
		for _, item := range strings.Split(string(v), ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	for _, v := range r.args.PeekMulti(name) {
		add(v)
	}
	for _, v := range r.args.PeekMulti(name + "[]") {
		add(v)
	}
	return out
}

// RESTResponse is a REST answer. With Member set the body is {"<Member>": Body, "error":
// null}; without, Body is the whole document (e.g. an OAuth2 token response). Body is
// written without a copy: the handler must not change it afterwards.
type RESTResponse struct {
	Status int // 200 when zero
	Member string
	Body   []byte // raw JSON
	Header map[string]string
}

// HTTPError is a REST failure with its HTTP status and a message for the client.
type HTTPError struct {
	Status  int
	Message string
	// RetryAfter, when above zero, is sent as Retry-After (seconds): the answer is a passing
	// state the client may retry (a 503 of a route not ready yet).
	RetryAfter int
}

func (e *HTTPError) Error() string { return e.Message }

// Errorf returns an *HTTPError with status and a formatted message.
func Errorf(status int, format string, args ...any) *HTTPError {
	return &HTTPError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// serveREST answers a REST route.
func (s *Server) serveREST(ctx *fasthttp.RequestCtx, rec *reqRecord, route *Route, params Params, reqID string, start time.Time) {
	body, owned, held, berr := s.readBody(ctx)
	if berr != nil {
		s.retryAfter(ctx, berr)
		rec.msg = berr.Message
		writeRESTError(ctx, berr.Status(), reqID, berr.Message)
		s.metrics.observeREST(route, berr.Status(), time.Since(start))
		return
	}
	if held > 0 {
		defer s.budget.give(held)
	}
	if !owned {
		body = append([]byte(nil), body...)
	}
	r := &RESTRequest{
		Ctx:       WithRequestID(rec.traceContext(s.ctx), reqID),
		RequestID: reqID,
		Method:    string(ctx.Method()),
		Params:    params.clone(),
		Body:      body,
		args:      ctx.QueryArgs(),
		header:    &ctx.Request.Header,
		resp:      &ctx.Response.Header,
		trusted:   s.trusted,
	}
	r.RemoteAddr = ctx.RemoteAddr()
	resp, err := route.REST.ServeREST(r)
	status := http.StatusOK
	if err != nil {
		status = s.restStatus(err, reqID, route)
		rec.msg = restMessage(err, status)
		if he := (*HTTPError)(nil); errors.As(err, &he) && he.RetryAfter > 0 {
			ctx.Response.Header.Set("Retry-After", strconv.Itoa(he.RetryAfter))
		}
		writeRESTError(ctx, status, reqID, rec.msg)
	} else {
		if resp.Status != 0 {
			status = resp.Status
		}
		for k, v := range resp.Header {
			ctx.Response.Header.Set(k, v)
		}
		body := resp.Body
		if resp.Member != "" {
			body = make([]byte, 0, len(resp.Member)+len(resp.Body)+24)
			body = append(body, '{')
			body = jsonString(body, resp.Member)
			body = append(body, ':')
			body = append(body, resp.Body...)
			body = append(body, `,"error":null}`...)
		}
		// Not copied: the handler's bytes are not changed afterwards (see RESTResponse).
		ctx.SetStatusCode(status)
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(body)
	}
	s.metrics.observeREST(route, status, time.Since(start))
}

// restStatus maps an error to its HTTP status; an error the handler did not classify is
// internal: logged here with its cause, answered 500.
func (s *Server) restStatus(err error, reqID string, route *Route) int {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		switch {
		case errors.Is(je, jsonrpc.ErrUpstreamTimeout):
			return http.StatusGatewayTimeout
		case errors.Is(je, jsonrpc.ErrUpstreamUnavailable):
			return http.StatusBadGateway
		case je.HTTPStatus >= 400 && je.HTTPStatus != http.StatusInternalServerError:
			return je.HTTPStatus
		case je.HTTPStatus == 0 || je.HTTPStatus == http.StatusOK:
			return http.StatusBadGateway // an upstream's JSON-RPC error
		}
	}
	s.log.Error("internal error", zap.String("req_id", reqID), zap.String("route", route.Name), zap.Error(err))
	return http.StatusInternalServerError
}

func restMessage(err error, status int) string {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Message
	}
	switch status {
	case http.StatusInternalServerError:
		return "internal error"
	case http.StatusBadGateway:
		return "upstream failure"
	case http.StatusGatewayTimeout:
		return "upstream timeout"
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Message
	}
	return http.StatusText(status)
}

// RESTError is the `error` member of REST responses (docs/api-objects.md).
type RESTError struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Request string `json:"request"`
	Message string `json:"message"`
}

// writeRESTError answers with {"error": {...}} and the HTTP status.
func writeRESTError(ctx *fasthttp.RequestCtx, status int, reqID, message string) {
	body, _ := json.Marshal(struct {
		Error RESTError `json:"error"`
	}{RESTError{Code: status, Status: http.StatusText(status), Request: reqID, Message: message}})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func jsonString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

func (p Params) clone() Params {
	return Params{names: p.names, values: append([]string(nil), p.values...)}
}
