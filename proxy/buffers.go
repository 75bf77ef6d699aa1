// The pool of the answers' buffers, and the writes of a JSON answer from one.

package proxy

import "github.com/valyala/fasthttp"

func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// writeBuf answers with the JSON in buf, a buffer of getBuf, and gives buf up: a small one
// back to the pool once its bytes are copied into the response, a large one to the response
// itself (no copy; fasthttp's pooled response buffer does not grow to its size).
func (s *Server) writeBuf(ctx *fasthttp.RequestCtx, status int, buf *[]byte) {
	if cap(*buf) > maxPooledBuf {
		ctx.SetStatusCode(status)
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(*buf)
		return
	}
	s.writeJSON(ctx, status, *buf)
	s.bufs.Put(buf)
}

// maxPooledBuf is the largest buffer kept in the pool: a large answer's buffer is left to
// the garbage collector, so that the pool never holds the memory of rare large answers.
const maxPooledBuf = 64 << 10

func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		s.bufs.Put(b)
	}
}
