// The entry point of every request: its request id and its route, then the path that serves it.

package proxy

import (
	"fmt"
	"net/http"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
)

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := ctx.Time() // fasthttp reads the clock for each request already
	if start.IsZero() {
		start = time.Now() // a RequestCtx that no fasthttp server handed over
	}
	var hdr reqHeaders
	hdr.read(&ctx.Request.Header)
	var idBuf [48]byte
	reqID := hdr.requestID
	if !validRequestID(reqID) {
		reqID = s.appendRequestID(idBuf[:0])
	}
	// Every answer carries the request id: those written below, and the WebSocket's 101
	// (startSocket) or its refusal.
	ctx.Response.Header.SetCanonical(headerRequestID, reqID)
	var rec reqRecord
	path := b2s(routePath(ctx))
	route, params, allowed := s.router.match(b2s(ctx.Method()), path)
	upgrade := false
	if route == nil && len(allowed) > 0 && s.ws != nil && ctx.IsGet() && websocket.FastHTTPIsWebSocketUpgrade(ctx) {
		route, params, upgrade = s.router.matchRPC(path)
	}
	if s.tracer != nil && route != nil && !upgrade {
		rec.trace = s.startTrace(ctx, route, reqID)
	}
	corsOK := s.cors.allows(hdr.origin)
	if corsOK {
		s.cors.answer(&ctx.Response.Header, hdr.origin)
	}
	switch {
	case upgrade:
		s.serveUpgrade(ctx, &rec, route, params, reqID, &hdr, start)
	case route == nil && len(allowed) > 0 && corsOK && ctx.IsOptions():
		s.cors.preflight(ctx, hdr.origin, allowed)
	case route == nil && len(allowed) > 0:
		for _, m := range allowed {
			ctx.Response.Header.Add("Allow", m)
		}
		rec.msg = fmt.Sprintf("method %s is not allowed here", truncate(string(ctx.Method()), 32))
		writeRESTError(ctx, http.StatusMethodNotAllowed, string(reqID), rec.msg)
	case route == nil:
		rec.msg = "no such route"
		writeRESTError(ctx, http.StatusNotFound, string(reqID), rec.msg)
	case route.REST != nil:
		s.serveREST(ctx, &rec, route, params, string(reqID), start)
	default:
		s.serveRPC(ctx, &rec, route, params, reqID, &hdr, start)
	}
	s.logRequest(&rec, reqID, route, ctx.Response.StatusCode(), start)
	if rec.trace != nil {
		endTrace(&rec, ctx.Response.StatusCode())
	}
	if ctx.Request.IsBodyStream() && !s.bodyPreRead(ctx.Request.Header.ContentLength()) {
		// Some of the body is still on the connection (unread, or the read failed): the
		// connection cannot carry another request.
		ctx.SetConnectionClose()
	}
}

// routePath is the path routes are matched against: the request URI as sent when it is a
// plain path that fasthttp's decoding and normalization would leave as it is, else
// fasthttp's decoded path (which parses the whole URI).
func routePath(ctx *fasthttp.RequestCtx) []byte {
	uri := ctx.Request.Header.RequestURI()
	if !plainPath(uri) {
		return ctx.Path()
	}
	return uri
}

// plainPath reports whether p is "/" followed by segments of [A-Za-z0-9_.~-], none empty,
// "." or "..": no query, escape, double slash or dot segment to decode or normalize.
func plainPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	seg := 0 // length of the current segment
	dots := 0
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if (seg == 0 && i < len(p)) || (seg > 0 && seg == dots && dots <= 2) {
				return false
			}
			seg, dots = 0, 0
			continue
		}
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '~':
		case c == '.':
			dots++
		default:
			return false
		}
		seg++
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
