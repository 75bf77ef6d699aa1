// The answers to requests that fasthttp could not read (its ErrorHandler).

package proxy

import (
	"bytes"
	"errors"
	"net"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// handleReadError answers requests fasthttp could not read: a head over maxHeaderBytes (414
// when the request line alone does not fit, else 431), a malformed request line or headers,
// a read timeout. The answer has the REST error object when the request's path (as far as
// its connection kept it, see watchedConn.sample; of a pipelined request, the first one's)
// is not a JSON-RPC route's, else the JSON-RPC error shape.
func (s *Server) handleReadError(ctx *fasthttp.RequestCtx, err error) {
	var (
		line     []byte
		lineDone bool
	)
	if wc, ok := ctx.Conn().(*watchedConn); ok {
		line, lineDone = wc.requestLine()
	}
	e := errMalformedRequest
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &small) && !lineDone:
		e = jsonrpc.ErrInvalidRequest.Withf("request URI too long: the request line and header fields are limited to %d bytes", s.maxHead)
		e.HTTPStatus = http.StatusRequestURITooLong
	case errors.As(err, &small):
		e = jsonrpc.ErrInvalidRequest.Withf("request header fields too large: the request line and header fields are limited to %d bytes", s.maxHead)
		e.HTTPStatus = http.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = s.errBodyTooLarge
	case isTimeout(err):
		e = errReadTimeout
	}
	if wc, ok := ctx.Conn().(*watchedConn); ok && e != errReadTimeout && e != errMalformedRequest {
		wc.linger = true // the client may still be sending what was refused
	}
	reqID := s.appendRequestID(nil)
	ctx.Response.Header.SetCanonical(headerRequestID, reqID)
	ctx.SetConnectionClose()
	rec := reqRecord{msg: e.Message}
	s.logRequest(&rec, reqID, nil, e.Status(), ctx.Time())
	if s.restLine(line) {
		writeRESTError(ctx, e.Status(), string(reqID), e.Message)
		return
	}
	s.writeJSON(ctx, e.Status(), jsonrpc.AppendResponse(nil, nil, nil, e))
}

// restLine reports whether a request whose line starts with line (up to headSample bytes)
// is for a path that no JSON-RPC route serves. A line without a path is not.
func (s *Server) restLine(line []byte) bool {
	_, target, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return false
	}
	if i := bytes.Index(target, []byte("://")); i > 0 && bytes.IndexByte(target[:i], '/') < 0 {
		// absolute form: scheme://authority/path
		target = target[i+3:]
		j := bytes.IndexByte(target, '/')
		if j < 0 {
			return false
		}
		target = target[j:]
	}
	if len(target) == 0 || target[0] != '/' {
		return false
	}
	end := bytes.IndexAny(target, "?# ")
	if end < 0 {
		return !s.router.rpcPath(string(target), false)
	}
	return !s.router.rpcPath(string(target[:end]), true)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
