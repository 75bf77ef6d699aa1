// Serving a JSON-RPC body, a POST's or a WebSocket message's: its calls and its answer.

package proxy

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// serveRPC answers a JSON-RPC request, single or batch.
func (s *Server) serveRPC(ctx *fasthttp.RequestCtx, rec *reqRecord, route *Route, params Params, reqID []byte, hdr *reqHeaders, start time.Time) {
	chainID, cerr := s.routeChain(route, params)
	if cerr != nil {
		s.writeRPCError(ctx, rec, route, nil, cerr, start)
		return
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 && !isJSON(ct) {
		s.writeRPCError(ctx, rec, route, nil, jsonrpc.ErrUnsupportedMedia, start)
		return
	}
	hdr.readURL(ctx, params)
	raw, owned, held, berr := s.readBody(ctx)
	if berr != nil {
		s.retryAfter(ctx, berr)
		s.writeRPCError(ctx, rec, route, nil, berr, start)
		return
	}
	if held > 0 {
		defer s.budget.give(held)
	}
	ex, body := newExchange(raw, owned, reqID, hdr, start)
	perr := jsonrpc.ParseInto(&ex.msg, body, s.cfg.MaxBatch)
	status, buf := s.answer(rec, ex, route, chainID, perr, start)
	writeLimit(&ctx.Response.Header, &ex.Limit)
	if buf == nil {
		ctx.SetStatusCode(status)
		return
	}
	s.writeBuf(ctx, status, buf)
}

// answer serves the message parsed into ex (perr: the error that answers it whole, from
// jsonrpc.ParseInto) and returns the HTTP status and the JSON answer, in a buffer of getBuf;
// the buffer is nil when nothing is answered (notifications only: 204). The same serves a
// POST body and a WebSocket message. What it answered is recorded in rec, for the request log.
func (s *Server) answer(rec *reqRecord, ex *Exchange, route *Route, chainID uint64, perr *jsonrpc.Error, start time.Time) (int, *[]byte) {
	msg := &ex.msg
	if rec.trace != nil {
		ex.trace = rec.trace
		if rec.trace.span.IsRecording() {
			rec.trace.span.SetAttributes(attribute.Int64("web3gate.chain_id", int64(chainID)))
		}
	}
	if perr != nil {
		var id []byte
		if !msg.Batch && len(msg.Requests) == 1 {
			id = msg.Requests[0].ID
		}
		return s.errorAnswer(rec, route, id, perr, start)
	}
	ex.Batch = msg.Batch
	rec.batch = msg.Batch
	defer rec.principalOf(ex)

	if !msg.Batch {
		r := msg.Requests[0]
		ex.single = Call{Ctx: ex.context(), Exchange: ex, Route: route, ChainID: chainID, Request: r}
		resp, err := s.serveCall(&ex.single, start)
		if f := ex.Fatal(); f != nil {
			rec.call(r.Method, nil)
			return s.errorAnswer(rec, route, r.ID, s.wireError(f, ex, r.Method), start)
		}
		if r.Notification() {
			rec.call(r.Method, nil) // its error, if any, is not answered
			return http.StatusNoContent, nil
		}
		if k, ok := ex.Socket.(*socket); ok && resp != nil && err == nil {
			if e := k.roomFor(len(resp.Result)); e != nil {
				// Its answer would not fit the socket's queue: it is not built.
				resp, err, ex.queueRefused = nil, e, e
			}
		}
		buf := s.getBuf()
		var e *jsonrpc.Error
		status := http.StatusOK
		if err != nil {
			e = s.wireError(err, ex, r.Method)
			status = e.Status()
		}
		rec.call(r.Method, e)
		*buf = jsonrpc.AppendResponse((*buf)[:0], r.ID, resultOf(resp), e)
		return status, buf
	}

	type outcome struct {
		resp *Response
		err  error
	}
	out := make([]outcome, len(msg.Requests))
	s.forEach(len(msg.Requests), func(i int) {
		r := msg.Requests[i]
		if r.Invalid != nil {
			out[i].err = r.Invalid
			return
		}
		c := &Call{Ctx: ex.context(), Exchange: ex, Route: route, ChainID: chainID, Request: r}
		if ex.trace != nil {
			span := ex.trace.startCall(c)
			out[i].resp, out[i].err = s.serveCall(c, time.Now())
			tracing.End(span, out[i].err)
			return
		}
		out[i].resp, out[i].err = s.serveCall(c, time.Now())
	})
	if f := ex.Fatal(); f != nil {
		for _, r := range msg.Requests {
			rec.call(r.Method, nil)
		}
		return s.errorAnswer(rec, route, nil, s.wireError(f, ex, ""), start)
	}
	buf := s.getBuf()
	b := append((*buf)[:0], '[')
	n := 0
	for i, r := range msg.Requests {
		if r.Notification() {
			rec.call(r.Method, nil) // its error, if any, is not answered
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		var e *jsonrpc.Error
		if out[i].err != nil {
			e = s.wireError(out[i].err, ex, r.Method)
		}
		rec.call(r.Method, e)
		b = jsonrpc.AppendResponse(b, r.ID, resultOf(out[i].resp), e)
	}
	b = append(b, ']')
	*buf = b
	if n == 0 {
		s.putBuf(buf)
		return http.StatusNoContent, nil
	}
	if r := ex.Refused(); r != nil {
		// Refused whole by a rate limit (Exchange.Charge): every call has its error, and the
		// HTTP status says so too.
		return s.wireError(r, ex, "").Status(), buf
	}
	return http.StatusOK, buf
}

// routeChain is the chain a request on route is for: the route's own (mainnet), or the
// {chain_id} of its path when that chain is served here (else 4901 unknown chain).
func (s *Server) routeChain(route *Route, params Params) (uint64, *jsonrpc.Error) {
	if route.ChainID != 0 {
		return route.ChainID, nil
	}
	raw := params.Get("chain_id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 || !s.known(id) {
		return 0, jsonrpc.ErrUnknownChain.Withf("chain %q is not served here", truncate(raw, 32))
	}
	return id, nil
}

// serveCall runs one call through its route's compiled chain and records its metrics,
// timed from t.
func (s *Server) serveCall(c *Call, t time.Time) (*Response, error) {
	resp, err := c.Route.Handler.Serve(c)
	took := time.Since(t)
	s.metrics.observe(c.Route, c.Request.Method, err, took)
	if ce := s.log.Check(zapcore.DebugLevel, "call"); ce != nil {
		fields := []zap.Field{zap.String("req_id", c.Exchange.RequestID), zap.String("method", jsonrpc.MethodLabel(c.Request.Method)), zap.Uint64("chain", c.ChainID), zap.Duration("took", took)}
		if err != nil {
			fields = append(fields, zap.String("error", err.Error()))
		}
		ce.Write(fields...)
	}
	return resp, err
}

// forEach runs f(0..n-1) with at most BatchConcurrency at once, and returns when all are done.
func (s *Server) forEach(n int, f func(i int)) {
	workers := min(s.cfg.BatchConcurrency, n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// wireError maps any error to the JSON-RPC error sent to the client. An error that is not a
// *jsonrpc.Error is internal: its cause is logged here, and the client sees -32603 only.
func (s *Server) wireError(err error, ex *Exchange, method string) *jsonrpc.Error {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e
	}
	s.log.Error("internal error", zap.String("req_id", ex.RequestID), zap.String("method", jsonrpc.MethodLabel(method)), zap.Error(err))
	return jsonrpc.ErrInternal
}

// writeRPCError answers the whole HTTP request with one JSON-RPC error object.
func (s *Server) writeRPCError(ctx *fasthttp.RequestCtx, rec *reqRecord, route *Route, id []byte, e *jsonrpc.Error, start time.Time) {
	status, buf := s.errorAnswer(rec, route, id, e, start)
	s.writeBuf(ctx, status, buf)
}

// errorAnswer records a request of route answered whole with e (in the metrics and in rec)
// and returns the HTTP status and the answer, in a buffer of getBuf.
func (s *Server) errorAnswer(rec *reqRecord, route *Route, id []byte, e *jsonrpc.Error, start time.Time) (int, *[]byte) {
	s.metrics.observe(route, "", e, time.Since(start))
	rec.fail(e)
	buf := s.getBuf()
	*buf = jsonrpc.AppendResponse((*buf)[:0], id, nil, e)
	return e.Status(), buf
}

func isJSON(ct []byte) bool {
	if string(ct) == "application/json" { // as nearly every client sends it
		return true
	}
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json"))
}

func resultOf(r *Response) []byte {
	if r == nil {
		return nil
	}
	return r.Result
}
