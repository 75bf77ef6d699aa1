package openapitest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
)

// Transport is an http.RoundTripper for tests that talk to running web3gate processes
// through clients they do not control (http.Get, http.DefaultClient, clients of their own):
// every answer of a registered listener is checked against the document, and a mismatch
// fails the test that registered the listener (t.Errorf: the test goes on, its answer in
// hand). Answers of JSON-RPC operations are passed through unread (a stream stays a
// stream); other answers are read whole before they are handed on. Answers of other
// servers pass through unchecked.
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport

	parent  *Transport // of a Wrap: the Transport whose listeners and checker it uses
	once    sync.Once
	checker *Checker
	err     error
	hosts   sync.Map // host:port -> listener
}

type listener struct {
	t testing.TB
	l Listener
}

// Install makes a Transport the transport of http.DefaultClient and of every client that
// names none, and returns it.
func Install() *Transport {
	tr := &Transport{Base: http.DefaultTransport}
	http.DefaultTransport = tr
	return tr
}

// Wrap returns base with the checks of tr: for the tests' own clients.
func (tr *Transport) Wrap(base http.RoundTripper) http.RoundTripper {
	return &Transport{Base: base, parent: tr}
}

// Register checks the answers of the listeners api and admin (host:port) until t ends; a
// mismatch fails t.
func (tr *Transport) Register(t testing.TB, api, admin string) {
	tr.hosts.Store(api, listener{t, Public})
	tr.hosts.Store(admin, listener{t, Admin})
	t.Cleanup(func() {
		tr.hosts.Delete(api)
		tr.hosts.Delete(admin)
	})
}

func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	root := tr
	if tr.parent != nil {
		root = tr.parent
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	v, ok := root.hosts.Load(req.URL.Host)
	if !ok {
		return resp, nil
	}
	reg := v.(listener)
	root.once.Do(func() { root.checker, root.err = New() })
	if root.err != nil {
		reg.t.Errorf("openapi: %v", root.err)
		return resp, nil
	}
	if root.checker.JSONRPC(reg.l, req) {
		return resp, nil
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil // the client sees a short body; nothing to check
	}
	if _, err := root.checker.Check(reg.l, req, resp.StatusCode, resp.Header, body); err != nil {
		reg.t.Errorf("%v\nbody: %.500s", err, body)
	}
	return resp, nil
}
