package jsonrpc

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// Request is one parsed JSON-RPC request. ID and Params are the raw JSON bytes exactly as the
// client sent them (ids are echoed byte for byte); they alias the body they were parsed from,
// so they live only as long as that body: copy before keeping them past the handler.
type Request struct {
	ID     []byte // raw JSON id; nil for a notification (no id member)
	Method string
	Params []byte // raw JSON array, or nil when absent or null

	// Invalid is set when this element of a batch is not a valid request. It is answered with
	// this error and never served.
	Invalid *Error
}

// Notification reports whether r carries no id and so gets no response.
func (r *Request) Notification() bool { return r.ID == nil }

// Message is a parsed request body: one request or a batch.
type Message struct {
	Batch    bool
	Requests []Request
}

// Parse parses and validates a request body. An error answers the whole body (a parse error,
// a body that is neither object nor array, an empty or oversize batch, or a single invalid
// request); an invalid element of a batch is marked Invalid instead. Parse never panics on
// any input.
func Parse(body []byte, maxBatch int) (Message, *Error) {
	s := bytesToString(body)
	if !gjson.Valid(s) {
		return Message{}, ErrParse
	}
	root := gjson.Parse(s)
	switch {
	case root.IsObject():
		r := parseOne(root)
		if r.Invalid != nil {
			return Message{Requests: []Request{r}}, r.Invalid
		}
		return Message{Requests: []Request{r}}, nil
	case root.IsArray():
		n := 0
		root.ForEach(func(_, _ gjson.Result) bool { n++; return n <= maxBatch })
		if n == 0 {
			return Message{Batch: true}, ErrInvalidRequest.With("empty batch")
		}
		if n > maxBatch {
			return Message{Batch: true}, ErrInvalidRequest.Withf("batch exceeds the limit of %d requests", maxBatch)
		}
		reqs := make([]Request, 0, n)
		root.ForEach(func(_, v gjson.Result) bool {
			if !v.IsObject() {
				reqs = append(reqs, Request{ID: null, Invalid: ErrInvalidRequest.With("batch element must be an object")})
				return true
			}
			reqs = append(reqs, parseOne(v))
			return true
		})
		return Message{Batch: true, Requests: reqs}, nil
	default:
		return Message{}, ErrInvalidRequest.With("request must be an object or an array")
	}
}

var null = []byte("null")

// parseOne validates one request object. On failure the returned request has Invalid set and
// an ID of the request's id when that was valid, else null.
func parseOne(obj gjson.Result) Request {
	var (
		r          Request
		version    gjson.Result
		method     gjson.Result
		params     gjson.Result
		hasVersion bool
		hasMethod  bool
		idErr      bool
	)
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "jsonrpc":
			version, hasVersion = v, true
		case "id":
			switch v.Type {
			case gjson.String, gjson.Number, gjson.Null:
				r.ID, idErr = stringToBytes(v.Raw), false
			default:
				r.ID, idErr = nil, true
			}
		case "method":
			method, hasMethod = v, true
		case "params":
			params = v
		}
		return true
	})
	invalid := func(e *Error) Request {
		if idErr || r.ID == nil {
			r.ID = null
		}
		r.Invalid = e
		return r
	}
	if idErr {
		return invalid(ErrInvalidRequest.With("id must be a string, a number or null"))
	}
	if !hasVersion || version.Type != gjson.String || version.Str != "2.0" {
		return invalid(ErrInvalidRequest.With(`jsonrpc must be "2.0"`))
	}
	if !hasMethod || method.Type != gjson.String {
		return invalid(ErrInvalidRequest.With("method must be a string"))
	}
	if method.Str == "" {
		return invalid(ErrInvalidRequest.With("method must not be empty"))
	}
	r.Method = method.Str
	switch {
	case !params.Exists(), params.Type == gjson.Null:
	case params.IsArray():
		r.Params = stringToBytes(params.Raw)
	case params.IsObject():
		return invalid(ErrInvalidParams.With("params must be an array"))
	default:
		return invalid(ErrInvalidRequest.With("params must be an array"))
	}
	return r
}

// bytesToString and stringToBytes alias without copying. The parsed strings point into the
// request body, which outlives the parse and is not modified while a request is served.
func bytesToString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func stringToBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
