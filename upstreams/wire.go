package upstreams

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// appendRequest appends the JSON-RPC request {"jsonrpc":"2.0","id":id,"method":m,"params":p}
// to dst. params is a raw JSON array, or nil for "[]".
func appendRequest(dst []byte, id uint64, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendUint(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, method)
	dst = append(dst, `,"params":`...)
	if len(params) == 0 {
		dst = append(dst, "[]"...)
	} else {
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string; plain ASCII (every method name in practice)
// takes no allocation.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

var (
	errNotJSON         = errors.New("response is not JSON")
	errNotResponse     = errors.New("response is not a JSON-RPC response object")
	errIDMismatch      = errors.New("response id does not match the request")
	errBadErrorObj     = errors.New("response error is not a JSON-RPC error object")
	errNoResultOrEr    = errors.New("response has neither result nor error")
	errBatchIncomplete = errors.New("batch response lacks some of the responses")
)

// parseResponse parses a JSON-RPC response body to the request with id. It returns the raw
// result (aliasing body), or the upstream's error object (copied out of body), or an error
// when body is not a valid JSON-RPC response to that request.
func parseResponse(body []byte, id uint64) (result []byte, rpcErr *jsonrpc.Error, err error) {
	r, _, ok := jsonrpc.ScanReply(body, nil)
	switch {
	case !ok:
		return nil, nil, errNotJSON
	case !r.IsObject():
		return nil, nil, errNotResponse
	}
	res, rpcErr, err := parseElement(&r)
	if err != nil {
		return nil, nil, err
	}
	// An error may come with id null (the upstream could not read the id); a result may not.
	if got, isNum := replyID(&r); (!isNum || got != id) && !(rpcErr != nil && string(r.ID) == "null") {
		return nil, nil, errIDMismatch
	}
	if rpcErr != nil {
		return nil, rpcErr, nil
	}
	return res, nil, nil
}

// replyID is the id of a response when it is a number that fits a uint64 (as the ids of
// web3gate's requests are).
func replyID(r *jsonrpc.Reply) (uint64, bool) {
	if len(r.ID) == 0 || r.ID[0] < '0' || r.ID[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(bytesToString(r.ID), 10, 64)
	return v, err == nil
}

// parseBatchResponse parses the answer to a batch of len(out) requests with ids first,
// first+1, …, into out (results copied), matching by id in any order. A single error object
// in place of the array is the upstream refusing the whole batch: returned as rpcErr. Any
// response missing, duplicated or unparseable makes the body invalid.
func parseBatchResponse(body []byte, first uint64, out []BatchResult) (rpcErr *jsonrpc.Error, err error) {
	var inline [16]jsonrpc.Reply
	r, elems, ok := jsonrpc.ScanReply(body, inline[:0])
	switch {
	case !ok:
		return nil, errNotJSON
	case r.IsObject():
		if _, rpcErr, err := parseElement(&r); err == nil && rpcErr != nil {
			return rpcErr, nil
		}
		return nil, errNotResponse
	case !r.IsArray():
		return nil, errNotResponse
	}
	clear(out)
	for k := range elems {
		el := &elems[k]
		if !el.IsObject() {
			return nil, errNotResponse
		}
		res, rpcErr, err := parseElement(el)
		if err != nil {
			return nil, err
		}
		got, isNum := replyID(el)
		i := got - first
		if !isNum || got < first || i >= uint64(len(out)) || out[i].Result != nil || out[i].Err != nil {
			return nil, errIDMismatch
		}
		if rpcErr != nil {
			out[i].Err = rpcErr
		} else {
			out[i].Result = append([]byte(nil), res...)
		}
	}
	if len(elems) != len(out) {
		return nil, errBatchIncomplete
	}
	return nil, nil
}

// parseElement reads one JSON-RPC response object: its result (aliasing the body), or its
// error (copied out of the body).
func parseElement(r *jsonrpc.Reply) (result []byte, rpcErr *jsonrpc.Error, err error) {
	if r.Error != nil && string(r.Error) != "null" {
		errv := gjson.ParseBytes(r.Error)
		if !errv.IsObject() {
			return nil, nil, errBadErrorObj
		}
		code, msg, data := errv.Get("code"), errv.Get("message"), errv.Get("data")
		if code.Type != gjson.Number || float64(int64(code.Num)) != code.Num {
			return nil, nil, errBadErrorObj
		}
		var raw json.RawMessage
		if data.Exists() {
			raw = json.RawMessage(append([]byte(nil), data.Raw...))
		}
		// msg.String() may alias the body, which is reused: the error outlives it.
		return nil, jsonrpc.FromUpstream(int(code.Int()), strings.Clone(msg.String()), raw), nil
	}
	if r.Result == nil {
		return nil, nil, errNoResultOrEr
	}
	return r.Result, nil, nil
}

// parseHexQuantity parses a JSON-RPC quantity result such as "0x1a" (quoted).
func parseHexQuantity(raw []byte) (uint64, error) {
	if len(raw) < 5 || raw[0] != '"' || raw[len(raw)-1] != '"' || raw[1] != '0' || (raw[2] != 'x' && raw[2] != 'X') {
		return 0, errors.New("not a hex quantity")
	}
	digits := raw[3 : len(raw)-1]
	if len(digits) > 16 {
		return 0, errors.New("hex quantity overflows 64 bits")
	}
	var v uint64
	for _, c := range digits {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, errors.New("not a hex quantity")
		}
		v = v<<4 | uint64(d)
	}
	return v, nil
}

// bytesToString aliases without copying; the callers never modify the bytes while the alias
// lives.
func bytesToString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
