// Package jsonrpc holds the JSON-RPC 2.0 wire types of web3gate: request parsing and
// validation, response encoding and the error codes. It does no I/O.
package jsonrpc

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is the one error type of web3gate's JSON-RPC surface. It carries the JSON-RPC code,
// message and optional data, and the HTTP status used when it answers a single request.
// It implements go-ethereum's rpc.Error and rpc.DataError.
type Error struct {
	Code       int
	Message    string
	Data       any // json.RawMessage for data passed through from an upstream
	HTTPStatus int

	kind *Error // the sentinel this error was derived from, for errors.Is
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// ErrorCode implements go-ethereum's rpc.Error.
func (e *Error) ErrorCode() int { return e.Code }

// ErrorData implements go-ethereum's rpc.DataError.
func (e *Error) ErrorData() any { return e.Data }

// Is reports whether target is the sentinel e was derived from (or e itself).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t == e || (e.kind != nil && t == e.kind)
}

// With returns a copy of e with message msg; errors.Is(copy, e) holds.
func (e *Error) With(msg string) *Error {
	c := *e
	c.Message = msg
	c.kind = e.root()
	return &c
}

// Withf is With with a format string.
func (e *Error) Withf(format string, args ...any) *Error {
	return e.With(fmt.Sprintf(format, args...))
}

// WithData returns a copy of e carrying data.
func (e *Error) WithData(data any) *Error {
	c := *e
	c.Data = data
	c.kind = e.root()
	return &c
}

func (e *Error) root() *Error {
	if e.kind != nil {
		return e.kind
	}
	return e
}

// Status is the HTTP status for a single request answered with e (200 when unset).
func (e *Error) Status() int {
	if e.HTTPStatus == 0 {
		return http.StatusOK
	}
	return e.HTTPStatus
}

// The sentinels. Codes and HTTP statuses follow docs/api-objects.md.
var (
	ErrParse               = &Error{Code: -32700, Message: "parse error", HTTPStatus: http.StatusBadRequest}
	ErrInvalidRequest      = &Error{Code: -32600, Message: "invalid request", HTTPStatus: http.StatusBadRequest}
	ErrBodyTooLarge        = &Error{Code: -32600, Message: "request body too large", HTTPStatus: http.StatusRequestEntityTooLarge}
	ErrUnsupportedMedia    = &Error{Code: -32600, Message: "content type must be application/json", HTTPStatus: http.StatusUnsupportedMediaType}
	ErrMethodNotFound      = &Error{Code: -32601, Message: "method not found", HTTPStatus: http.StatusOK}
	ErrInvalidParams       = &Error{Code: -32602, Message: "invalid params", HTTPStatus: http.StatusOK}
	ErrInternal            = &Error{Code: -32603, Message: "internal error", HTTPStatus: http.StatusInternalServerError}
	ErrUnauthorized        = &Error{Code: 4100, Message: "Not Authorized", HTTPStatus: http.StatusUnauthorized}
	ErrUnknownChain        = &Error{Code: 4901, Message: "unknown chain", HTTPStatus: http.StatusNotFound}
	ErrLimitExceeded       = &Error{Code: -32005, Message: "limit exceeded", HTTPStatus: http.StatusTooManyRequests}
	ErrUpstreamTimeout     = &Error{Code: -32002, Message: "upstream timeout", HTTPStatus: http.StatusGatewayTimeout}
	ErrUpstreamUnavailable = &Error{Code: -32011, Message: "no healthy upstream", HTTPStatus: http.StatusServiceUnavailable}
	// ErrStoreUnavailable: web3gate's own database (store) cannot serve the request: stopped,
	// restarting, unreachable, or not answering within store.transactionTimeout. EIP-1474's
	// -32002 "resource unavailable"; retry later.
	ErrStoreUnavailable = &Error{Code: -32002, Message: "store unavailable", HTTPStatus: http.StatusServiceUnavailable}
	// ErrSignerUnavailable: the backend holding the account's key (a PKCS#11 token, a KMS)
	// did not sign in time, or is down; nothing was signed or sent. -32002 "resource
	// unavailable"; retry later.
	ErrSignerUnavailable = &Error{Code: -32002, Message: "signer unavailable", HTTPStatus: http.StatusServiceUnavailable}
)

// FromUpstream builds the error an upstream node answered, to pass through unchanged.
func FromUpstream(code int, message string, data json.RawMessage) *Error {
	e := &Error{Code: code, Message: message, HTTPStatus: http.StatusOK}
	if len(data) > 0 {
		e.Data = data
	}
	return e
}
