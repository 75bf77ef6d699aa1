package upstreams

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/rawconn"
	"github.com/web3gate/web3gate/internal/tracing"
)

// transport sends one JSON-RPC request body to a node.
type transport interface {
	// roundTrip POSTs body and appends the response body to dst. The attempt ends at
	// deadline (errAttemptTimeout) or when ctx is done (ctx.Err()). body is not retained
	// after roundTrip returns.
	roundTrip(ctx context.Context, deadline time.Time, body, dst []byte) (status int, out []byte, err error)
	// closeIdle closes idle connections.
	closeIdle()
}

// Errors of roundTrip besides ctx.Err() and plain transport errors.
var (
	errAttemptTimeout   = errors.New("upstream attempt timed out")
	errResponseTooLarge = errors.New("upstream response exceeds maxResponseBytes")
	errBusy             = errors.New("no free connection to the upstream node")
)

// maxConnsPerNode bounds the connections to one node; requests beyond it wait for a free
// connection until their deadline.
const maxConnsPerNode = 512

// httpTransport speaks HTTP/1.1 to one node through a fasthttp.HostClient (keep-alive
// connection reuse, no internal retries).
type httpTransport struct {
	hc   *fasthttp.HostClient
	uri  string // the URL without userinfo: it may carry an API key in its path or query
	auth string // Authorization header from the URL's userinfo, or ""
	wg   *sync.WaitGroup
	// propagate: each request carries the traceparent of its context's span, if any
	// (tracing.enabled).
	propagate bool
}

func newHTTPTransport(raw string, cfg *Config, wg *sync.WaitGroup) (*httpTransport, error) {
	u, err := parseNodeURL(raw)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	t := &httpTransport{wg: wg}
	if u.User != nil {
		pass, _ := u.User.Password()
		t.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	}
	clean := *u
	clean.User = nil
	t.uri = clean.String()
	t.hc = &fasthttp.HostClient{
		Addr:                      net.JoinHostPort(u.Hostname(), port),
		IsTLS:                     u.Scheme == "https",
		Name:                      "web3gate",
		DialTimeout:               dialTimeout,
		MaxConns:                  maxConnsPerNode,
		MaxConnWaitTimeout:        cfg.Timeout,
		MaxIdleConnDuration:       30 * time.Second,
		MaxIdemponentCallAttempts: 1, // failover is ours; fasthttp must not resend
		ReadTimeout:               cfg.Timeout,
		WriteTimeout:              cfg.Timeout,
		MaxResponseBodySize:       cfg.MaxResponseBytes,
		DisablePathNormalizing:    true, // the path may be an API key: send it byte for byte
	}
	return t, nil
}

// dialTimeout dials with the standard resolver; fasthttp's default dialer starts a
// process-global DNS cache goroutine that never ends.
func dialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return rawconn.Wrap(c), nil
}

// redactURL returns scheme://host of a node URL: no userinfo, path or query, any of which
// may hold an API key. It is the only form of a URL that is logged.
func redactURL(raw string) string {
	if raw == EmbeddedURL {
		return EmbeddedURL
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "invalid-url"
	}
	return u.Scheme + "://" + u.Host
}

// httpCall is one pooled exchange: its request and response, and the hand-off between the
// caller and the goroutine that runs it when the caller's context can be canceled.
type httpCall struct {
	req      fasthttp.Request
	resp     fasthttp.Response
	hc       *fasthttp.HostClient
	deadline time.Time
	err      error
	state    atomic.Uint32 // callRunning, callDelivered or callAbandoned
	done     chan struct{} // capacity 1; signalled once the result is delivered
	wg       *sync.WaitGroup
}

const (
	callRunning uint32 = iota
	callDelivered
	callAbandoned
)

var callPool = sync.Pool{New: func() any { return &httpCall{done: make(chan struct{}, 1)} }}

func (c *httpCall) release() {
	if len(c.resp.Body()) > maxPooledBuffer {
		return // keep no large eth_getLogs answer alive in the pool
	}
	c.req.Reset()
	c.resp.Reset()
	c.hc, c.err, c.wg = nil, nil, nil
	c.state.Store(callRunning)
	callPool.Put(c)
}

// run performs the exchange in its own goroutine. When the caller has abandoned the call,
// run releases it; otherwise the caller does after reading the result.
func (c *httpCall) run() {
	wg := c.wg
	c.err = c.hc.DoDeadline(&c.req, &c.resp, c.deadline)
	if c.state.CompareAndSwap(callRunning, callDelivered) {
		c.done <- struct{}{} // the caller owns c from here
	} else {
		c.release()
	}
	wg.Done()
}

func (t *httpTransport) roundTrip(ctx context.Context, deadline time.Time, body, dst []byte) (int, []byte, error) {
	c := callPool.Get().(*httpCall)
	c.hc, c.deadline = t.hc, deadline
	c.req.Header.SetMethod(fasthttp.MethodPost)
	c.req.SetRequestURI(t.uri)
	c.req.Header.SetContentType("application/json")
	if t.auth != "" {
		c.req.Header.Set(fasthttp.HeaderAuthorization, t.auth)
	}
	if t.propagate {
		tracing.Inject(ctx, &c.req.Header)
	}
	c.req.SetBody(body)

	if ctx.Done() == nil {
		// Nothing can cancel ctx: the deadline is all there is to enforce.
		c.err = c.hc.DoDeadline(&c.req, &c.resp, deadline)
	} else {
		// fasthttp knows deadlines but not contexts: run the exchange aside and stop
		// waiting when ctx is done. The abandoned exchange ends by its deadline.
		c.wg = t.wg
		t.wg.Add(1)
		go c.run()
		select {
		case <-c.done:
		case <-ctx.Done():
			if c.state.CompareAndSwap(callRunning, callAbandoned) {
				return 0, dst, ctx.Err()
			}
			<-c.done
		}
	}
	if err := c.err; err != nil {
		c.release()
		return 0, dst, classifyFasthttpError(err)
	}
	status := c.resp.StatusCode()
	dst = append(dst, c.resp.Body()...)
	c.release()
	return status, dst, nil
}

func classifyFasthttpError(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &ne) && ne.Timeout():
		return errAttemptTimeout
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return errResponseTooLarge
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return errBusy
	}
	return err
}

func (t *httpTransport) closeIdle() { t.hc.CloseIdleConnections() }

// embeddedTransport calls an in-process http.Handler (the embedded dev chain's JSON-RPC
// server) with a real *http.Request. The handler runs in its own goroutine so that the
// attempt's deadline and the caller's context bound the wait even if the handler ignores
// its request context.
type embeddedTransport struct {
	h     http.Handler
	limit int
	wg    *sync.WaitGroup
	log   *zap.Logger
	// propagate: as httpTransport's.
	propagate bool
}

func (t *embeddedTransport) roundTrip(ctx context.Context, deadline time.Time, body, dst []byte) (int, []byte, error) {
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, "http://embedded/", bytes.NewReader(bytes.Clone(body)))
	if err != nil {
		return 0, dst, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.propagate {
		tracing.InjectHTTP(ctx, req.Header)
	}
	req.RemoteAddr = "127.0.0.1:0"
	w := &bufferWriter{header: make(http.Header), limit: t.limit}
	done := make(chan error, 1)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				t.log.Error("embedded upstream handler panicked", zap.Any("panic", r))
				done <- fmt.Errorf("embedded handler panicked: %v", r)
			}
		}()
		t.h.ServeHTTP(w, req)
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			return 0, dst, err
		}
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			return 0, dst, err
		}
		return 0, dst, errAttemptTimeout
	}
	if w.tooLarge {
		return 0, dst, errResponseTooLarge
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.status, append(dst, w.buf...), nil
}

func (t *embeddedTransport) closeIdle() {}

// bufferWriter is the http.ResponseWriter of an embedded call: it buffers the body up to a
// limit and records the status.
type bufferWriter struct {
	header   http.Header
	status   int
	buf      []byte
	limit    int
	tooLarge bool
}

func (w *bufferWriter) Header() http.Header { return w.header }

func (w *bufferWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if len(w.buf)+len(p) > w.limit {
		w.tooLarge = true
		return 0, errResponseTooLarge
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}
