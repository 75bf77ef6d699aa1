// Command bare is the baseline of `go run ./bench`: a fasthttp server doing nothing but
// what any JSON-RPC server over HTTP does at least. It answers every POST with one constant
// JSON-RPC reply or, with -upstream, is the least a forwarder does: it POSTs the body to
// the upstream with a fasthttp.HostClient and answers with the upstream's body.
//
// Its listener and client are configured like web3gate's (server name, timeouts, body
// limits, Date header, connection limit), so that web3gate's ratio to it measures
// web3gate's own work.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

// reply is the constant answer: what web3gate sends to eth_chainId on the dev chain.
var reply = []byte(`{"jsonrpc":"2.0","id":1,"result":"0x539"}`)

// Limits, as web3gate's defaults.
const (
	maxBodyBytes     = 5 << 20
	maxResponseBytes = 32 << 20
	timeout          = 30 * time.Second
	upstreamTimeout  = 10 * time.Second
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "forward every request to this http:// URL instead of answering")
	flag.Parse()
	if err := serve(*listen, *upstream); err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		os.Exit(1)
	}
}

func serve(addr, upstream string) error {
	handler := answer
	if upstream != "" {
		f, err := newForwarder(upstream)
		if err != nil {
			return err
		}
		handler = f.forward
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &fasthttp.Server{
		Name:                         "bare",
		Handler:                      handler,
		MaxRequestBodySize:           maxBodyBytes,
		ReadTimeout:                  timeout,
		WriteTimeout:                 timeout,
		IdleTimeout:                  120 * time.Second,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
	}
	err = srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func answer(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.SetStatusCode(http.StatusMethodNotAllowed)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(reply)
}

// forwarder sends each request body to one upstream.
type forwarder struct {
	hc  *fasthttp.HostClient
	uri string
}

func newForwarder(raw string) (*forwarder, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("-upstream %q: want http://host:port[/path]", raw)
	}
	return &forwarder{uri: raw, hc: &fasthttp.HostClient{
		Addr:                      u.Host,
		Name:                      "bare",
		Dial:                      func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, upstreamTimeout) },
		MaxConns:                  512,
		MaxConnWaitTimeout:        upstreamTimeout,
		MaxIdleConnDuration:       30 * time.Second,
		MaxIdemponentCallAttempts: 1,
		ReadTimeout:               upstreamTimeout,
		WriteTimeout:              upstreamTimeout,
		MaxResponseBodySize:       maxResponseBytes,
	}}, nil
}

func (f *forwarder) forward(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.SetStatusCode(http.StatusMethodNotAllowed)
		return
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(f.uri)
	req.Header.SetContentType("application/json")
	req.SetBody(ctx.PostBody())
	if err := f.hc.DoTimeout(req, resp, upstreamTimeout); err != nil {
		ctx.SetStatusCode(http.StatusBadGateway)
		return
	}
	ctx.SetStatusCode(resp.StatusCode())
	ctx.SetContentType("application/json")
	ctx.SetBody(resp.Body())
}
