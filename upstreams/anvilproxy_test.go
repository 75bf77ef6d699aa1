package upstreams

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
)

// nodeProxy is a real HTTP proxy in front of an anvil node that counts the calls it passes
// on by method and can slow them down or refuse eth_getLogs ranges as too large:
//   - every request waits base (checks included), and reads (any method but eth_chainId and
//     eth_blockNumber) wait slow more, or until the client goes away;
//   - eth_getLogs over more than maxRange blocks (when set) gets the error refusal (default
//     Besu's -32005 "Requested range exceeds maximum RPC range limit": a bound on the range).
type nodeProxy struct {
	node     *anvil.Node
	srv      *httptest.Server
	client   *http.Client
	base     time.Duration
	slow     atomic.Int64 // nanoseconds
	maxRange atomic.Uint64
	refusal  atomic.Pointer[string] // the JSON error object; nil: Besu's range refusal
	// tail: when set, a read waits tailDelay with probability tailP (a node's latency tail).
	tailP     float64
	tailDelay time.Duration

	refused atomic.Int64
	mu      sync.Mutex
	counts  map[string]int
}

func newNodeProxy(t testing.TB, node *anvil.Node, base time.Duration) *nodeProxy {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	p := &nodeProxy{node: node, base: base, client: &http.Client{Transport: tr}, counts: map[string]int{}}
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		p.srv.Close()
		tr.CloseIdleConnections()
	})
	return p
}

func (p *nodeProxy) URL() string { return p.srv.URL }

func (p *nodeProxy) count(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[method]
}

type proxiedCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params []struct {
		FromBlock string `json:"fromBlock"`
		ToBlock   string `json:"toBlock"`
	} `json:"params"`
}

func (p *nodeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var calls []proxiedCall
	if len(body) > 0 && body[0] == '[' {
		_ = json.Unmarshal(body, &calls)
	} else {
		var c proxiedCall
		_ = json.Unmarshal(body, &c)
		calls = []proxiedCall{c}
	}
	reads := false
	p.mu.Lock()
	for _, c := range calls {
		p.counts[c.Method]++
		reads = reads || c.Method != "eth_chainId" && c.Method != "eth_blockNumber"
	}
	p.mu.Unlock()
	wait := p.base
	if reads {
		wait += time.Duration(p.slow.Load())
		if p.tailP > 0 && rand.Float64() < p.tailP {
			wait += p.tailDelay
		}
	}
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
	}
	if len(calls) == 1 && calls[0].Method == "eth_getLogs" && p.tooWide(calls[0]) {
		p.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		e := `{"code":-32005,"message":"Requested range exceeds maximum RPC range limit"}`
		if r := p.refusal.Load(); r != nil {
			e = *r
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(calls[0].ID)+`,"error":`+e+`}`)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.node.URL, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// tooWide reports whether c asks logs over more than maxRange blocks (numbers only).
func (p *nodeProxy) tooWide(c proxiedCall) bool {
	limit := p.maxRange.Load()
	if limit == 0 || len(c.Params) != 1 {
		return false
	}
	from, err1 := parseHexQuantity([]byte(`"` + c.Params[0].FromBlock + `"`))
	to, err2 := parseHexQuantity([]byte(`"` + c.Params[0].ToBlock + `"`))
	return err1 == nil && err2 == nil && to >= from && to-from+1 > limit
}

// anvilConfig is a test config of one chain (31337, "anvil") whose urls are the proxies'.
func anvilConfig(proxies ...*nodeProxy) Config {
	urls := make([]string, len(proxies))
	for i, p := range proxies {
		urls[i] = p.URL()
	}
	return Config{
		Timeout:      5 * time.Second,
		MaxAttempts:  3,
		PollInterval: 50 * time.Millisecond,
		MaxLag:       new(uint64(5)),
		EjectAfter:   3,
		Cooldown:     10 * time.Second,
		Chains:       []ChainConfig{{ChainID: 31337, Name: "anvil", URLs: urls}},
	}
}

func (s testSet) anvilPool(t testing.TB) *Pool {
	t.Helper()
	p, ok := s.Pool(31337)
	if !ok {
		t.Fatal("no pool for chain 31337")
	}
	return p
}
