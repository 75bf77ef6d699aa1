package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// CORS: a dApp's page calls web3gate from the browser (viem's http(url), ethers'
// JsonRpcProvider), and the browser lets it read the answers only when web3gate says the
// page's origin may. The hosted node providers answer every origin, as web3gate does by
// default: the API's credentials are headers a page must hold (X-API-Key, a bearer token),
// never cookies, so allowing an origin grants nothing a page does not already have, and
// Access-Control-Allow-Credentials is never sent. The admin listener answers none.

// CORSConfig is `server.cors`.
type CORSConfig struct {
	// AllowedOrigins are the origins ("https://app.example", scheme://host[:port]) whose
	// pages may read the public API's answers; "*" is any. Absent: ["*"]. [] turns CORS off.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// MaxAge is how long a browser may reuse a preflight's answer. Default 2h (Chromium's
	// cap).
	MaxAge time.Duration `yaml:"maxAge"`
}

// SetDefaults fills unset fields with their defaults.
func (c *CORSConfig) SetDefaults() {
	if c.AllowedOrigins == nil {
		c.AllowedOrigins = []string{"*"}
	}
	if c.MaxAge == 0 {
		c.MaxAge = 2 * time.Hour
	}
}

func (c *CORSConfig) problems() []error {
	var errs []error
	for i, o := range c.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" ||
			u.Fragment != "" || u.User != nil || o != strings.ToLower(o) {
			errs = append(errs, fmt.Errorf("cors.allowedOrigins[%d]: %q must be \"*\" or a lower-case origin, scheme://host[:port]", i, o))
		}
	}
	if c.MaxAge < 0 || c.MaxAge > 24*time.Hour {
		errs = append(errs, errors.New("cors.maxAge: must be between 0 and 24h"))
	}
	return errs
}

// cors is a compiled CORSConfig.
type cors struct {
	any     bool
	origins map[string]bool
	maxAge  []byte
}

func newCORS(c CORSConfig) *cors {
	r := &cors{origins: map[string]bool{}, maxAge: []byte(strconv.Itoa(int(c.MaxAge / time.Second)))}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			r.any = true
		}
		r.origins[o] = true
	}
	return r
}

// The headers a page may send (beyond the CORS-safelisted ones) and read.
var (
	corsAllowHeaders  = []byte("Content-Type, Authorization, X-API-Key, Idempotency-Key, X-Fee-Bump, X-Request-Id")
	corsExposeHeaders = []byte("X-Request-Id, Retry-After, X-Indexed-Block, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset")
)

// allows reports whether a page of origin may read the answers.
func (c *cors) allows(origin []byte) bool {
	return len(origin) > 0 && (c.any || c.origins[string(origin)])
}

// answer adds the CORS headers of an answer to a request from origin.
func (c *cors) answer(h *fasthttp.ResponseHeader, origin []byte) {
	if c.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.SetBytesV("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	h.SetBytesV("Access-Control-Expose-Headers", corsExposeHeaders)
}

// preflight answers a browser's OPTIONS preflight of a route whose methods are allowed:
// 204 with what the page may send.
func (c *cors) preflight(ctx *fasthttp.RequestCtx, origin []byte, allowed []string) {
	c.answer(&ctx.Response.Header, origin)
	h := &ctx.Response.Header
	h.Set("Access-Control-Allow-Methods", strings.Join(allowed, ", "))
	h.SetBytesV("Access-Control-Allow-Headers", corsAllowHeaders)
	h.SetBytesV("Access-Control-Max-Age", c.maxAge)
	ctx.SetStatusCode(http.StatusNoContent)
}
