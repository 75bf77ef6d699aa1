package jsonrpc

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// parseReference is the parser Parse replaced (gjson.Valid, then gjson walks of the tree),
// kept as the oracle of FuzzParseMatchesReference. An error answers the whole body (a parse error,
// a body that is neither object nor array, an empty or oversize batch, or a single invalid
// request); an invalid element of a batch is marked Invalid instead. Parse never panics on
// any input.
func parseReference(body []byte, maxBatch int) (Message, *Error) {
	s := bytesToString(body)
	if !gjson.Valid(s) {
		return Message{}, ErrParse
	}
	root := gjson.Parse(s)
	switch {
	case root.IsObject():
		r := referenceOne(root)
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
			reqs = append(reqs, referenceOne(v))
			return true
		})
		return Message{Batch: true, Requests: reqs}, nil
	default:
		return Message{}, ErrInvalidRequest.With("request must be an object or an array")
	}
}

// parseOne validates one request object. On failure the returned request has Invalid set and
// an ID of the request's id when that was valid, else null.
func referenceOne(obj gjson.Result) Request {
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
	if len(r.ID) > MaxIDBytes {
		r.ID = nil
		return invalid(ErrInvalidRequest.Withf("id too long: its JSON text exceeds %d bytes", MaxIDBytes))
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

func stringToBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
