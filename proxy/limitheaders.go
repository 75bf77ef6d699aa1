package proxy

import (
	"strconv"

	"github.com/valyala/fasthttp"
)

// The headers of a rate-limited client's answers (the IETF draft "RateLimit header fields
// for HTTP"; CORS exposes them to pages, see corsExposeHeaders) and Retry-After, in fasthttp's
// normalized case (header names are case-insensitive) so that SetCanonical stores them as
// Set would.
var (
	hdrRateLimitLimit     = []byte("Ratelimit-Limit")
	hdrRateLimitRemaining = []byte("Ratelimit-Remaining")
	hdrRateLimitReset     = []byte("Ratelimit-Reset")
	hdrRetryAfter         = []byte("Retry-After")
)

// writeLimit sets the RateLimit-* headers of l, and Retry-After when l refused, on h; nothing
// when no limit applied. It allocates nothing.
func writeLimit(h *fasthttp.ResponseHeader, l *LimitInfo) {
	if l.Limit == 0 {
		return
	}
	var b [10]byte
	h.SetCanonical(hdrRateLimitLimit, strconv.AppendUint(b[:0], uint64(l.Limit), 10))
	h.SetCanonical(hdrRateLimitRemaining, strconv.AppendUint(b[:0], uint64(l.Remaining), 10))
	h.SetCanonical(hdrRateLimitReset, strconv.AppendUint(b[:0], uint64(l.Reset), 10))
	if l.RetryAfter > 0 {
		h.SetCanonical(hdrRetryAfter, strconv.AppendUint(b[:0], uint64(l.RetryAfter), 10))
	}
}
