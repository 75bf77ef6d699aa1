package jsonrpc

import (
	"encoding/json"
	"strconv"
)

// AppendResponse appends the JSON-RPC response object for id to dst: result when err is nil
// (null when result is empty), otherwise the error object. id is raw JSON; nil means null.
func AppendResponse(dst, id, result []byte, err *Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, id...)
	}
	if err != nil {
		dst = append(dst, `,"error":`...)
		dst = AppendError(dst, err)
		return append(dst, '}')
	}
	dst = append(dst, `,"result":`...)
	if len(result) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, result...)
	}
	return append(dst, '}')
}

// AppendError appends the JSON error object {"code","message"[,"data"]} of e to dst.
func AppendError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	if e.Data != nil {
		data, err := json.Marshal(e.Data)
		if err == nil {
			dst = append(dst, `,"data":`...)
			dst = append(dst, data...)
		}
	}
	return append(dst, '}')
}

func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
