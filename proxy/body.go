package proxy

import (
	"errors"
	"io"
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// Request bodies are read as they arrive. fasthttp streams them (StreamRequestBody): before
// it calls the handler it reads at most streamedBodyOver bytes of a body, into a buffer of that
// size at most, whatever length the body declares. A body within that size is then in memory
// whole, as an unstreamed body would be; the handler reads the rest of a longer one
// (readStreamed) into a buffer that grows with the bytes received, each growth taken from the
// body budget first (server.maxBodyBytesInFlight), and never pooled. A client that declares
// 5 MiB and sends a few bytes holds 8 KiB, not 5 MiB.

// streamedBodyOver is the most of a body that fasthttp reads before it calls the handler (its
// pre-read of a streamed body).
const streamedBodyOver = 8 << 10

// readBody returns the body of the request: fasthttp's buffer (owned false: valid until the
// handler returns) when the body came whole with the head, else web3gate's own copy read from
// the connection (owned true) together with the bytes of the body budget it holds, to give
// back once the request is answered. A body that cannot be read is answered with the error:
// its connection is then closed (Server.handle closes every connection with a body left
// unread).
func (s *Server) readBody(ctx *fasthttp.RequestCtx) (body []byte, owned bool, held int, _ *jsonrpc.Error) {
	if !ctx.Request.IsBodyStream() {
		// No body, or a RequestCtx that no fasthttp server handed over (benchmarks).
		b := ctx.PostBody()
		if len(b) > s.maxBody {
			return nil, false, 0, s.errBodyTooLarge
		}
		return b, false, 0, nil
	}
	cl := ctx.Request.Header.ContentLength()
	if s.bodyPreRead(cl) {
		if cl == 0 {
			return nil, false, 0, nil
		}
		return ctx.Request.Body(), false, 0, nil // drains the stream of what was pre-read
	}
	b, held, err := s.readStreamed(ctx, cl)
	return b, true, held, err
}

// bodyPreRead reports whether fasthttp read a body of length cl (-1: chunked) whole before
// it called the handler.
func (s *Server) bodyPreRead(cl int) bool {
	return cl >= 0 && cl <= min(streamedBodyOver, s.maxBody)
}

// readStreamed reads the rest of a streamed body of length cl (-1: chunked) as it arrives,
// within the read timeout counted from the request's first byte.
func (s *Server) readStreamed(ctx *fasthttp.RequestCtx, cl int) (body []byte, held int, _ *jsonrpc.Error) {
	if cl > s.maxBody {
		return nil, 0, s.errBodyTooLarge
	}
	if wc, ok := ctx.Conn().(*watchedConn); ok {
		wc.readingBody()
	}
	limit := cl
	if cl < 0 {
		limit = s.maxBody + 1 // a byte over the limit shows a chunked body too large
	}
	r := ctx.RequestBodyStream()
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= limit {
				if cl >= 0 {
					break // all of it (the stream ends with its last bytes: not reached)
				}
				s.budget.give(held)
				return nil, 0, s.errBodyTooLarge
			}
			size := min(max(2*cap(buf), 2*streamedBodyOver), limit)
			if !s.budget.take(size - cap(buf)) {
				s.budget.give(held)
				s.metrics.refusedBudget.Inc()
				return nil, 0, s.errBodiesInFlight
			}
			held += size - cap(buf)
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.budget.give(held)
			if isTimeout(err) {
				return nil, 0, errReadTimeout
			}
			return nil, 0, errMalformedRequest
		}
	}
	if len(buf) > s.maxBody {
		s.budget.give(held)
		return nil, 0, s.errBodyTooLarge
	}
	_ = ctx.Request.CloseBodyStream() // read to its end: the connection may carry another request
	return buf, held, nil
}

// retryAfter asks the client of a request refused for the bodies in flight to retry after a
// second.
func (s *Server) retryAfter(ctx *fasthttp.RequestCtx, e *jsonrpc.Error) {
	if e == s.errBodiesInFlight {
		ctx.Response.Header.Set("Retry-After", "1")
	}
}

// The errors of a request that could not be read.
var (
	errReadTimeout = func() *jsonrpc.Error {
		e := jsonrpc.ErrInvalidRequest.With("request read timed out")
		e.HTTPStatus = http.StatusRequestTimeout
		return e
	}()
	errMalformedRequest = jsonrpc.ErrParse.With("malformed HTTP request")
)

// bodyErrors builds the errors of readBody that quote the limits.
func (s *Server) bodyErrors() {
	s.errBodyTooLarge = jsonrpc.ErrBodyTooLarge.Withf("request body exceeds %d bytes", s.maxBody)
	s.errBodiesInFlight = jsonrpc.ErrLimitExceeded.Withf("server busy: the request bodies being read exceed %d bytes; retry later", s.budget.limit)
	s.errBodiesInFlight.HTTPStatus = http.StatusServiceUnavailable
}
