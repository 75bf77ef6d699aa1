package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// behaviour is how a fake node answers a request.
type behaviour int32

const (
	answerOK              behaviour = iota // the result of the route table
	answer500                              // HTTP 500, text body
	answer503                              // HTTP 503, text body
	answer429                              // HTTP 429, text body
	answerGarbage                          // HTTP 200, an HTML body
	answerWrongID                          // HTTP 200, a JSON-RPC response with another id
	answerHang                             // no answer until the client goes away
	answerHijack                           // the connection is closed without a response
	answerRPCError                         // HTTP 200, the JSON-RPC error of rpcError
	answerHTTP400RPCError                  // HTTP 400 carrying the JSON-RPC error of rpcError
	answerBig                              // HTTP 200, a result of bigResultBytes
)

const (
	rpcErrorCode    = 3
	rpcErrorMessage = "execution reverted: not owner"
	// rpcErrorData is the raw JSON of the error's data member, with spacing an encoder would
	// not reproduce: it must come through byte for byte.
	rpcErrorData   = `{ "reason":"0x08c379a0", "n": [1,2] }`
	bigResultBytes = 4096
)

// fakeNode is a real HTTP server answering JSON-RPC by method, with a behaviour per class of
// method that a test can change at any time: checks (eth_chainId, eth_blockNumber) and
// everything else (reads and writes).
type fakeNode struct {
	name    string
	srv     *httptest.Server
	chainID atomic.Uint64
	head    atomic.Uint64
	reads   atomic.Int32 // behaviour for methods other than the checks
	checks  atomic.Int32 // behaviour for eth_chainId and eth_blockNumber
	failN   atomic.Int32 // when > 0: the next failN reads get HTTP 500
	noBatch atomic.Bool  // batches get the error a node without batch support gives
	dropOne atomic.Bool  // the next batch answer lacks its first response
	// hold: when set, a request whose body holds the string "holder" (holdSlot's call)
	// waits until the channel is closed, the client goes away or the node stops.
	hold atomic.Pointer[chan struct{}]

	mu       sync.Mutex
	counts   map[string]int
	lastAuth string
	lastURI  string
	badReqs  []string // problems with requests as received

	stop      chan struct{} // closed to end hanging handlers
	closeOnce sync.Once
}

func newFakeNode(t *testing.T, name string, chainID, head uint64) *fakeNode {
	t.Helper()
	f := &fakeNode{name: name, counts: map[string]int{}, stop: make(chan struct{})}
	f.chainID.Store(chainID)
	f.head.Store(head)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.close)
	return f
}

// close ends hanging handlers and stops the server; it may be called more than once.
func (f *fakeNode) close() {
	f.closeOnce.Do(func() {
		close(f.stop)
		f.srv.Close()
	})
}

func (f *fakeNode) URL() string { return f.srv.URL }

func (f *fakeNode) setReads(b behaviour)  { f.reads.Store(int32(b)) }
func (f *fakeNode) setChecks(b behaviour) { f.checks.Store(int32(b)) }

// count is the number of requests received for method.
func (f *fakeNode) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method]
}

// countReads is the number of requests received for any method but the checks.
func (f *fakeNode) countReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for m, c := range f.counts {
		if m != "eth_chainId" && m != "eth_blockNumber" {
			n += c
		}
	}
	return n
}

// lastRequest returns the Authorization header and request URI of the latest request.
func (f *fakeNode) lastRequest() (auth, uri string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastAuth, f.lastURI
}

func (f *fakeNode) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.badReqs...)
}

type fakeRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func (f *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if h := f.hold.Load(); h != nil && strings.Contains(string(body), `"holder"`) {
		select {
		case <-*h:
		case <-r.Context().Done():
		case <-f.stop:
		}
	}
	if len(body) > 0 && body[0] == '[' && f.serveBatch(w, body) {
		return
	}
	var req fakeRequest
	err := json.Unmarshal(body, &req)
	f.mu.Lock()
	f.counts[req.Method]++
	f.lastAuth = r.Header.Get("Authorization")
	f.lastURI = r.URL.RequestURI()
	switch {
	case err != nil:
		f.badReqs = append(f.badReqs, "body is not a JSON object: "+err.Error())
	case r.Method != http.MethodPost:
		f.badReqs = append(f.badReqs, "method "+r.Method)
	case r.Header.Get("Content-Type") != "application/json":
		f.badReqs = append(f.badReqs, "content type "+r.Header.Get("Content-Type"))
	case req.JSONRPC != "2.0" || len(req.ID) == 0 || req.Params == nil || req.Params[0] != '[':
		f.badReqs = append(f.badReqs, "envelope "+string(body))
	}
	f.mu.Unlock()

	b := behaviour(f.reads.Load())
	if req.Method == "eth_chainId" || req.Method == "eth_blockNumber" {
		b = behaviour(f.checks.Load())
	} else if f.failN.Load() > 0 && f.failN.Add(-1) >= 0 {
		b = answer500
	}
	writeRPC := func(status int, member, value string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%q:%s}`, req.ID, member, value)
	}
	rpcError := fmt.Sprintf(`{"code":%d,"message":%q,"data":%s}`, rpcErrorCode, rpcErrorMessage, rpcErrorData)
	switch b {
	case answerOK:
		writeRPC(http.StatusOK, "result", f.result(req.Method, req.Params))
	case answer500:
		http.Error(w, "internal error", http.StatusInternalServerError)
	case answer503:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	case answer429:
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case answerGarbage:
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
	case answerWrongID:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":987654321,"result":"0x1"}`)
	case answerHang:
		select {
		case <-r.Context().Done():
		case <-f.stop:
		}
	case answerHijack:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	case answerRPCError:
		writeRPC(http.StatusOK, "error", rpcError)
	case answerHTTP400RPCError:
		writeRPC(http.StatusBadRequest, "error", rpcError)
	case answerBig:
		writeRPC(http.StatusOK, "result", `"`+strings.Repeat("a", bigResultBytes)+`"`)
	}
}

// serveBatch answers a batch body when reads answer OK (in reverse order, so that clients
// must match by id; method "fail_me" gets rpcError) or a wrong id (one response missing).
// Otherwise it counts the batch and returns false: serve answers with the read behaviour.
// A batch of checks only (the pool's head poll) is served by serveChecks.
func (f *fakeNode) serveBatch(w http.ResponseWriter, body []byte) bool {
	var reqs []fakeRequest
	err := json.Unmarshal(body, &reqs)
	if err == nil && len(reqs) > 0 && onlyChecks(reqs) {
		f.serveChecks(w, reqs)
		return true
	}
	f.mu.Lock()
	f.counts["batch"]++
	if err != nil || len(reqs) == 0 {
		f.badReqs = append(f.badReqs, "batch body: "+string(body))
	}
	for _, r := range reqs {
		f.counts["batched "+r.Method]++
	}
	f.mu.Unlock()
	if f.noBatch.Load() {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`)
		return true
	}
	b := behaviour(f.reads.Load())
	if f.failN.Load() > 0 && f.failN.Add(-1) >= 0 {
		b = answer500
	}
	if b != answerOK && b != answerWrongID {
		return false
	}
	out := make([]string, 0, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		req := reqs[i]
		if b == answerWrongID && i == 0 || i == 0 && f.dropOne.CompareAndSwap(true, false) {
			continue
		}
		if req.Method == "fail_me" {
			out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, req.ID, rpcErrorCode, rpcErrorMessage))
			continue
		}
		out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, f.result(req.Method, req.Params)))
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "["+strings.Join(out, ",")+"]")
	return true
}

func onlyChecks(reqs []fakeRequest) bool {
	for _, r := range reqs {
		if r.Method != "eth_chainId" && r.Method != "eth_blockNumber" {
			return false
		}
	}
	return true
}

// serveChecks answers a batch of checks with the checks behaviour: each call counts under
// its method as if it came alone, the batch under "check batch" (not "batch": the reads'
// batches are counted apart). noBatch refuses it as it refuses any batch ("refused check
// batch").
func (f *fakeNode) serveChecks(w http.ResponseWriter, reqs []fakeRequest) {
	w.Header().Set("Content-Type", "application/json")
	if f.noBatch.Load() {
		f.mu.Lock()
		f.counts["refused check batch"]++
		f.mu.Unlock()
		io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`)
		return
	}
	f.mu.Lock()
	f.counts["check batch"]++
	for _, r := range reqs {
		f.counts[r.Method]++
	}
	f.mu.Unlock()
	switch b := behaviour(f.checks.Load()); b {
	case answerOK:
		out := make([]string, len(reqs))
		for i, r := range reqs {
			out[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, r.ID, f.result(r.Method, r.Params))
		}
		io.WriteString(w, "["+strings.Join(out, ",")+"]")
	case answerHang:
		<-f.stop
	default:
		// Every failure of a check is a 500 here: what the tests need of a failing check.
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// result is the route table: the checks answer the node's chain id and head; every other
// method answers the node's name, so that a test sees who served it.
func (f *fakeNode) result(method string, params json.RawMessage) string {
	switch method {
	case "eth_chainId":
		return fmt.Sprintf(`"0x%x"`, f.chainID.Load())
	case "eth_blockNumber":
		return fmt.Sprintf(`"0x%x"`, f.head.Load())
	case "echo_params":
		return string(params)
	}
	return `"` + f.name + `"`
}

// testConfig is a config with short durations for tests, one chain (1337, "dev") whose urls
// are the nodes'.
func testConfig(nodes ...*fakeNode) Config {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL()
	}
	return Config{
		Timeout:      300 * time.Millisecond,
		MaxAttempts:  3,
		PollInterval: 50 * time.Millisecond,
		MaxLag:       new(uint64(5)),
		EjectAfter:   3,
		Cooldown:     10 * time.Second,
		Chains:       []ChainConfig{{ChainID: 1337, Name: "dev", URLs: urls}},
	}
}

type testSet struct {
	*Set
	reg *prometheus.Registry
}

// startSet builds and starts a set; it is closed when the test ends.
func startSet(t testing.TB, cfg Config, deps Deps) testSet {
	t.Helper()
	reg := prometheus.NewRegistry()
	deps.Registry = reg
	if deps.Logger == nil {
		deps.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	s.Start(context.Background())
	return testSet{Set: s, reg: reg}
}

func (s testSet) dev(t *testing.T) *Pool {
	t.Helper()
	p, ok := s.Pool(1337)
	if !ok {
		t.Fatal("no pool for chain 1337")
	}
	return p
}

// metricValue is the value of the counter or gauge name with exactly labels, 0 if absent.
func (s testSet) metricValue(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return 0
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// status returns the named node's status.
func status(t *testing.T, p *Pool, name string) NodeStatus {
	t.Helper()
	for _, s := range p.Nodes() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no node %q", name)
	return NodeStatus{}
}

// forwardN makes n reads and returns the results and the number of failures.
func forwardN(t *testing.T, p *Pool, n int) (results []string, failed int) {
	t.Helper()
	for range n {
		res, err := p.Forward(context.Background(), "eth_getBalance", []byte(`["0x0000000000000000000000000000000000000001","latest"]`))
		if err != nil {
			t.Logf("read failed: %v", err)
			failed++
			continue
		}
		results = append(results, string(res))
	}
	return results, failed
}

// asRPCError returns err as a *jsonrpc.Error or fails the test.
func asError[T error](t *testing.T, err error) T {
	t.Helper()
	var e T
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a %T", err, err, e)
	}
	return e
}
