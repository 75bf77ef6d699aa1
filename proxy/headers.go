package proxy

import (
	"bytes"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// reqHeaders are the request headers the pipeline reads, found in one pass over the header
// (fasthttp's Peek normalizes its key and scans every header again on each call). Like Peek,
// the first of a repeated header counts, but for X-API-Key: a repeated one must carry the
// same client id (clientIDConflict). The values alias fasthttp's buffers: copy them before
// the handler returns.
type reqHeaders struct {
	requestID, clientID, authorization, idempotencyKey, origin, feeBump []byte
	seen                                                                uint8
	// clientIDConflict is set by read and readURL when two of the X-API-Key headers, the
	// URL's path segment and its apiKey query parameters carry different client ids.
	clientIDConflict bool
}

const (
	seenRequestID uint8 = 1 << iota
	seenAuthorization
	seenIdempotencyKey
	seenOrigin
	seenFeeBump
)

var (
	hdrRequestID      = []byte("X-Request-Id")
	hdrClientID       = []byte("X-Api-Key")
	hdrAuthorization  = []byte("Authorization")
	hdrIdempotencyKey = []byte("Idempotency-Key")
	hdrOrigin         = []byte("Origin")
	hdrFeeBump        = []byte("X-Fee-Bump")
)

func (r *reqHeaders) read(h *fasthttp.RequestHeader) {
	for k, v := range h.All() {
		var bit uint8
		var dst *[]byte
		switch {
		case len(k) == len(hdrRequestID) && bytes.EqualFold(k, hdrRequestID):
			bit, dst = seenRequestID, &r.requestID
		case len(k) == len(hdrClientID) && bytes.EqualFold(k, hdrClientID):
			r.addClientID(v)
			continue
		case len(k) == len(hdrAuthorization) && bytes.EqualFold(k, hdrAuthorization):
			bit, dst = seenAuthorization, &r.authorization
		case len(k) == len(hdrIdempotencyKey) && bytes.EqualFold(k, hdrIdempotencyKey):
			bit, dst = seenIdempotencyKey, &r.idempotencyKey
		case len(k) == len(hdrOrigin) && bytes.EqualFold(k, hdrOrigin):
			bit, dst = seenOrigin, &r.origin
		case len(k) == len(hdrFeeBump) && bytes.EqualFold(k, hdrFeeBump):
			bit, dst = seenFeeBump, &r.feeBump
		default:
			continue
		}
		if r.seen&bit == 0 {
			r.seen |= bit
			*dst = v
		}
	}
}

// QueryClientID is the query parameter that carries the client id in a URL, as the X-API-Key
// header does: "/v1/web3/mainnet?apiKey=ID".
const QueryClientID = "apiKey"

// readURL takes the client id of an RPC request's URL, for wallets that take only a URL: the
// route's {client_id} segment (params) and the apiKey query parameters (each of them, when
// the key is repeated). The first non-empty one of the X-API-Key headers, the segment and the
// query is the client id; any other non-empty one that differs sets clientIDConflict. Like
// the header's, the values alias fasthttp's buffers.
func (r *reqHeaders) readURL(ctx *fasthttp.RequestCtx, params Params) {
	if id := params.Get(ClientIDParam); id != "" {
		r.addClientID(unsafe.Slice(unsafe.StringData(id), len(id)))
	}
	// Most requests have no query: spare them the parse of the URI and its arguments.
	if bytes.IndexByte(ctx.Request.Header.RequestURI(), '?') >= 0 {
		for k, v := range ctx.QueryArgs().All() {
			if string(k) == QueryClientID {
				r.addClientID(v)
			}
		}
	}
}

func (r *reqHeaders) addClientID(id []byte) {
	switch {
	case len(id) == 0:
	case len(r.clientID) == 0:
		r.clientID = id
	case !bytes.Equal(r.clientID, id):
		r.clientIDConflict = true
	}
}

// newExchange makes the exchange of one HTTP request: a copy of body and the strings of
// the exchange share one array, the exchange's inline one when they fit (nothing in an
// exchange aliases fasthttp's buffers: calls may outlive them, in coalesced upstream
// requests and batch workers). A body already owned (web3gate's own copy, see readBody) is
// kept as it is, not copied. It returns the exchange and its copy of body, which nothing
// writes to.
func newExchange(body []byte, owned bool, reqID []byte, h *reqHeaders, start time.Time) (*Exchange, []byte) {
	ex := &Exchange{Start: start}
	bearer, bad := []byte(nil), false
	if len(h.authorization) > 0 {
		if tok, ok := bearerToken(h.authorization); ok {
			bearer = tok
		} else {
			bad = true
		}
	}
	copied := body
	if owned {
		copied = nil
	}
	var buf []byte
	if n := len(copied) + len(reqID) + len(h.clientID) + len(bearer) + len(h.idempotencyKey); n <= len(ex.inline) {
		buf = ex.inline[:0:n] // a small request: one allocation, the exchange's
	} else {
		buf = make([]byte, 0, n)
	}
	buf = append(buf, copied...)
	own := buf[:len(copied):len(copied)]
	if owned {
		own = body
	}
	str := func(b []byte) string {
		if len(b) == 0 {
			return ""
		}
		n := len(buf)
		buf = append(buf, b...) // within the capacity: the strings share buf's array
		return unsafe.String(&buf[n], len(b))
	}
	ex.RequestID = str(reqID)
	ex.ClientID = str(h.clientID)
	ex.Bearer = str(bearer)
	ex.BadAuthHeader = bad
	ex.ClientIDConflict = h.clientIDConflict
	if len(h.idempotencyKey) > 0 {
		ex.IdempotencyKey = str(h.idempotencyKey)
		ex.HasIdempotencyKey = true
	}
	switch {
	case len(h.feeBump) == 0:
	case bytes.EqualFold(h.feeBump, []byte("allow")):
		ex.FeeBump = FeeBumpAllow
	case bytes.EqualFold(h.feeBump, []byte("deny")):
		ex.FeeBump = FeeBumpDeny
	default:
		ex.FeeBump = FeeBumpInvalid
	}
	return ex, own
}

// bearerToken returns the token of an "Authorization: Bearer <token>" value; it aliases h.
func bearerToken(h []byte) ([]byte, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !bytes.EqualFold(h[:len(prefix)], []byte(prefix)) {
		return nil, false
	}
	tok := bytes.TrimSpace(h[len(prefix):])
	if len(tok) == 0 {
		return nil, false
	}
	return tok, true
}
