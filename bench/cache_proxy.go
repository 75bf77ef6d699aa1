//go:build linux

// (t)'s counting proxy in front of anvil: the upstream calls, and which trace calls went upstream.

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// upstreamCounter is an HTTP proxy to anvil that counts the calls it forwards.
type upstreamCounter struct {
	url      string
	target   string
	calls    atomic.Int64
	finality atomic.Int64
	client   *http.Client
	// forwarded counts the forwarded calls by method and params (*forwarded by forwardKey),
	// to class each trace call as answered locally or upstream.
	forwarded sync.Map
}

// forwarded is the proxy's record of one forwardKey: how many requests carried it, and the
// anvil round trip (ns) of the last one.
type forwarded struct{ n, node atomic.Int64 }

func (u *upstreamCounter) record(key string) *forwarded {
	v, ok := u.forwarded.Load(key)
	if !ok {
		v, _ = u.forwarded.LoadOrStore(key, new(forwarded))
	}
	return v.(*forwarded)
}

// forwardKey identifies a call by its method and its params as sent.
func forwardKey(method string, params []byte) string { return method + " " + string(params) }

// forwards is how many calls of key the proxy has forwarded.
func (u *upstreamCounter) forwards(key string) int64 {
	if v, ok := u.forwarded.Load(key); ok {
		return v.(*forwarded).n.Load()
	}
	return 0
}

func (u *upstreamCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	type call struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	var calls []call
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		_ = json.Unmarshal(body, &calls)
	} else {
		calls = make([]call, 1)
		_ = json.Unmarshal(body, &calls[0])
	}
	for _, c := range calls {
		p := string(c.Params)
		switch {
		case c.Method == "eth_chainId" || c.Method == "eth_blockNumber":
		case c.Method == "eth_getBlockByNumber" && (p == `["latest",false]` || p == `["finalized",false]`):
			u.finality.Add(1)
		default:
			u.calls.Add(1)
		}
	}
	t0 := time.Now()
	resp, err := u.client.Post(u.target, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	node := time.Since(t0)
	// Recorded before the answer goes back, so that the client finds it when it is answered.
	for _, c := range calls {
		f := u.record(forwardKey(c.Method, c.Params))
		f.node.Store(int64(node))
		f.n.Add(1)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}
