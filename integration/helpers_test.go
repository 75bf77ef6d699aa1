package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/internal/cli"
	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/openapi/openapitest"
	"github.com/web3gate/web3gate/store"
)

// The helpers of the whole-server tests: start a server from a config text (the shipped
// config.yaml with test-sized limits, or a config of fake upstreams), send it requests,
// serve a fake upstream, read a metric.

// TestMain fails the package when a goroutine outlives the servers the tests started and
// stopped (every test stops its server through app.Run's context).
func TestMain(m *testing.M) { leaktest.Main(m) }

// testServer is a web3gate started in process by app.Run on loopback ports.
type testServer struct {
	API, Admin string // base URLs
	stop       func()
}

// startServer runs web3gate with the config text on free loopback ports until the test ends.
func startServer(t testing.TB, cfgText string) *testServer {
	t.Helper()
	return startServerIn(t, cfgText, t.TempDir(), io.Discard)
}

// startServerIn is startServer with the state (store, keystore, JWT key) in dir and the logs
// written to logw.
func startServerIn(t testing.TB, cfgText, dir string, logw io.Writer) *testServer {
	t.Helper()
	return startConfig(t, testConfig(t, cfgText, dir), logw)
}

// startConfig runs web3gate with cfg (testConfig's, changed by the test) until the test ends.
func startConfig(t testing.TB, cfg *config.Config, logw io.Writer) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, app.Options{Version: "test", Log: logw,
			Ready: func(api, admin net.Addr) { addrs <- [2]net.Addr{api, admin} }})
	}()
	var ts *testServer
	select {
	case a := <-addrs:
		ts = &testServer{API: "http://" + a[0].String(), Admin: "http://" + a[1].String()}
		answers.serve(t, a[0].String(), a[1].String())
	case err := <-done:
		cancel()
		t.Fatalf("web3gate did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("web3gate did not start within 30s")
	}
	stopped := false
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("web3gate did not stop within 30s")
		}
	}
	t.Cleanup(ts.stop)
	return ts
}

// testConfig is the config text with free loopback ports and its state (store, keystore,
// JWT signing key) in dir.
func testConfig(t testing.TB, cfgText, dir string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Server.DrainDelay = 0 // the tests stop their servers at once (internal/app/drain_test.go tests the delay)
	setTestStore(t, &cfg.Store, dir)
	cfg.Wallet.Keys.Dir = filepath.Join(dir, "keystore")
	cfg.Auth.OAuth.SigningKeyFile = filepath.Join(dir, "jwt-signing-key.pem")
	return cfg
}

// testStoreDSNs are the PostgreSQL databases of the test directories (servers started again
// in one directory find their state).
var testStoreDSNs sync.Map

// setTestStore points c at the store of dir: the SQLite file dir/web3gate.db, or, with
// WEB3GATE_TEST_STORE=postgres, a PostgreSQL database of dir's own (testengine.Postgres,
// dropped when the test that made it ends).
func setTestStore(t testing.TB, c *store.Config, dir string) {
	t.Helper()
	switch be := os.Getenv("WEB3GATE_TEST_STORE"); be {
	case "", store.DriverSQLite:
		c.Path = filepath.Join(dir, "web3gate.db")
	case store.DriverPostgres:
		dsn, ok := testStoreDSNs.Load(dir)
		if !ok {
			dsn = testengine.Postgres(t)
			testStoreDSNs.Store(dir, dsn)
		}
		c.Driver, c.DSN = store.DriverPostgres, dsn.(string)
	default:
		t.Fatalf("WEB3GATE_TEST_STORE=%q: must be sqlite or postgres", be)
	}
}

// withTestStore is the config text cfgText with its store section pointed at the store of
// dir (setTestStore), for the command line commands of a test beside its server.
func withTestStore(t testing.TB, cfgText, dir string) string {
	t.Helper()
	var c store.Config
	setTestStore(t, &c, dir)
	var out string
	if c.Driver == store.DriverPostgres {
		out = strings.Replace(cfgText, "  driver: sqlite\n", "  driver: postgres\n  dsn: "+c.DSN+"\n", 1)
	} else {
		out = strings.Replace(cfgText, "  path: web3gate.db\n", "  path: "+c.Path+"\n", 1)
	}
	if out == cfgText {
		t.Fatal("config.yaml changed: the store section was not found")
	}
	return out
}

// deploymentConfig is devConfig with a 1 MiB request body: room for contract deployments.
func deploymentConfig(t testing.TB) string {
	t.Helper()
	return strings.Replace(devConfig(t), "maxBodyBytes: 4096", "maxBodyBytes: 1048576", 1)
}

// devConfig is the shipped config.yaml with test-sized limits.
func devConfig(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	s = strings.Replace(s, "maxBodyBytes: 5242880", "maxBodyBytes: 4096", 1)
	s = strings.Replace(s, "maxBatch: 100", "maxBatch: 5", 1)
	s = strings.Replace(s, "level: info", "level: warn", 1)
	// The confirmer reads blocks often: the tests wait for mined states.
	s = strings.Replace(s, "pollInterval: 1s\n    # A broadcast", "pollInterval: 100ms\n    # A broadcast", 1)
	// A signing rule on dev account 9 (testdata/transactions.rpc).
	s = strings.Replace(s, "    rules: []\n", `    rules:
      - account: "0x1ac9ea42Bf97174D69e0F4CDa39684109C90c59E"
        allowedRecipients: ["0x000000000000000000000000000000000000dEaD"]
        maxValue: "1000"
`, 1)
	// The tests poll the REST routes every 20ms from one address until an index catches up,
	// and load one client and principal beyond the shipped budgets (500 concurrent sends and
	// more); ratelimit_test.go tests the limits.
	s = strings.Replace(s, "ip: {rate: 10, burst: 100}", "ip: {rate: 1000, burst: 1000}", 1)
	s = strings.Replace(s, "client: {rate: 2000, burst: 20000}", "client: {rate: 1000000, burst: 1000000}", 1)
	s = strings.Replace(s, "principal: {rate: 1000, burst: 10000}", "principal: {rate: 1000000, burst: 1000000}", 1)
	for _, want := range []string{"maxBodyBytes: 4096", "maxBatch: 5", "pollInterval: 100ms", `maxValue: "1000"`, "ip: {rate: 1000, burst: 1000}",
		"client: {rate: 1000000, burst: 1000000}", "principal: {rate: 1000000, burst: 1000000}"} {
		if !strings.Contains(s, want) {
			t.Fatalf("devConfig: config.yaml changed, %q not set", want)
		}
	}
	return s
}

// strictConfig is devConfig in the strict form: every transaction field required, nonce
// refused.
func strictConfig(t testing.TB) string {
	t.Helper()
	s := strings.Replace(devConfig(t), "    fill: true\n", "    fill: false\n", 1)
	if !strings.Contains(s, "fill: false") {
		t.Fatal("strictConfig: config.yaml changed, no wallet.transactions.fill")
	}
	return s
}

// upstreamConfig is a config serving chain 1 from the given node URLs, without the dev
// chain, with the test credentials test-client and test-token (post's).
func upstreamConfig(extra string, urls ...string) string {
	return fmt.Sprintf(`
log: {level: warn}
auth:
  clients: [{id: test-client}]
  tokens:
    - sha256: %s
      principal: tester
upstreams:
  mainnet: 1
  timeout: 500ms
  pollInterval: 100ms
  cooldown: 1s
  chains:
    - chainId: 1
      name: one
      urls: [%s]
%s`, sha256Hex("test-token"), strings.Join(urls, ", "), extra)
}

// fakeUpstream is a real HTTP server answering JSON-RPC from a route table, counting the
// requests of each method.
type fakeUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	counts map[string]int
	// routes answer a method: the raw JSON result, or a func writing the whole HTTP answer.
	routes map[string]func(w http.ResponseWriter, id json.RawMessage)
}

// newFakeUpstream serves chain chainID at f.srv.URL until the test ends.
func newFakeUpstream(t *testing.T, chainID uint64) *fakeUpstream {
	f := &fakeUpstream{counts: map[string]int{}, routes: map[string]func(http.ResponseWriter, json.RawMessage){}}
	f.result("eth_chainId", fmt.Sprintf(`"0x%x"`, chainID))
	f.result("eth_blockNumber", `"0x64"`)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// result makes the upstream answer method with the raw JSON result; safe while it serves.
func (f *fakeUpstream) result(method, raw string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[method] = func(w http.ResponseWriter, id json.RawMessage) {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, raw)
	}
}

// count is the number of requests of method the upstream received.
func (f *fakeUpstream) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method]
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.counts[req.Method]++
	route := f.routes[req.Method]
	f.mu.Unlock()
	if route == nil {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"the method %s does not exist/is not available"}}`, req.ID, req.Method)
		return
	}
	route(w, req.ID)
}

// do sends an HTTP request with client: body nil for none, headers as name/value pairs.
func do(client *http.Client, method, url string, body []byte, headers []string) (int, http.Header, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0, nil, nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read body: %w", err)
	}
	// The request that got the answer: the last one when redirects were followed.
	return resp.StatusCode, resp.Header, b, answers.check(resp.Request, resp.StatusCode, resp.Header, b)
}

// answers checks every answer of a test server that do receives against the OpenAPI
// document (openapi/openapi.yaml; the rules are openapitest.Checker's): a mismatch is do's
// error, which fails the test. The answers of other servers (fake upstreams, webhook
// receivers) are not checked. With WEB3GATE_OPENAPI_LOG=<file>, each answer's rule is
// appended to the file: which routes and statuses the tests reach.
var answers = &answerCheck{}

type answerCheck struct {
	once    sync.Once
	checker *openapitest.Checker
	err     error
	hosts   sync.Map // host:port of a running test server -> openapitest.Listener
	logMu   sync.Mutex
}

// serve registers a test server's listeners until the test ends.
func (a *answerCheck) serve(t testing.TB, api, admin string) {
	a.hosts.Store(api, openapitest.Public)
	a.hosts.Store(admin, openapitest.Admin)
	t.Cleanup(func() {
		a.hosts.Delete(api)
		a.hosts.Delete(admin)
	})
}

func (a *answerCheck) check(req *http.Request, status int, h http.Header, body []byte) error {
	l, ok := a.hosts.Load(req.URL.Host)
	if !ok {
		return nil // not a web3gate listener
	}
	a.once.Do(func() { a.checker, a.err = openapitest.New() })
	if a.err != nil {
		return a.err
	}
	res, err := a.checker.Check(l.(openapitest.Listener), req, status, h, body)
	if path := os.Getenv("WEB3GATE_OPENAPI_LOG"); path != "" {
		a.logMu.Lock()
		if f, ferr := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); ferr == nil {
			fmt.Fprintf(f, "%s\t%s\t%s\t%s\t%d\t%v\n", res.Rule, res.Operation, req.Method, req.URL.Path, status, err != nil)
			f.Close()
		}
		a.logMu.Unlock()
	}
	return err
}

// request is do with the default client; a failure fails the test.
func request(t testing.TB, method, url string, body []byte, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	status, h, b, err := do(http.DefaultClient, method, url, body, headers)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return status, h, b
}

// headerPairs are the headers of a map as request takes them.
func headerPairs(m map[string]string) []string {
	pairs := make([]string, 0, 2*len(m))
	for k, v := range m {
		pairs = append(pairs, k, v)
	}
	return pairs
}

// post posts a JSON body to url with the credentials of upstreamConfig (the headers, as
// name/value pairs, override them).
func post(t testing.TB, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	headers = append([]string{"Content-Type", "application/json", "X-API-Key", "test-client", "Authorization", "Bearer test-token"}, headers...)
	return request(t, http.MethodPost, url, []byte(body), headers...)
}

// get GETs a REST or admin route with the header name/value pairs.
func get(t testing.TB, url string, headers ...string) (int, string) {
	t.Helper()
	status, _, b := request(t, http.MethodGet, url, nil, headers...)
	return status, string(b)
}

// getH is get with the answer's headers.
func getH(t testing.TB, url string, headers ...string) (int, http.Header, string) {
	t.Helper()
	status, h, b := request(t, http.MethodGet, url, nil, headers...)
	return status, h, string(b)
}

// rpcResult is one JSON-RPC answer.
type rpcResult struct {
	Status int
	Result json.RawMessage
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

// rpcCall posts the JSON-RPC call method(params) to url with client and the credentials of
// the shipped config (devConfig; the headers override them), and decodes the answer. A
// failure is reported with t.Errorf, so that goroutines of a test may call it.
func rpcCall(t testing.TB, client *http.Client, url, method string, params any, headers ...string) rpcResult {
	t.Helper()
	p, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + string(p) + `}`)
	headers = append([]string{"Content-Type", "application/json", "X-API-Key", config.DevClientID, "Authorization", "Bearer " + config.DevToken}, headers...)
	status, _, b, err := do(client, http.MethodPost, url, body, headers)
	if err != nil {
		t.Errorf("%s: %v", method, err)
		return rpcResult{}
	}
	var out rpcResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Errorf("%s: HTTP %d, undecodable body: %v", method, status, err)
	}
	out.Status = status
	return out
}

// gwCall posts one JSON-RPC call to api's mainnet route with the credentials of
// upstreamConfig and returns its result; an error answer fails the test.
func gwCall(t *testing.T, api, method, params string) string {
	t.Helper()
	_, _, body := post(t, api+"/v1/web3/mainnet", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`)
	var r struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Error != nil || r.Result == nil {
		t.Fatalf("%s %s: %s", method, params, body)
	}
	return string(r.Result)
}

// metric returns the value of the series (name and labels as /metrics prints them), 0 when
// absent.
func metric(t *testing.T, admin, series string) float64 {
	t.Helper()
	_, body := get(t, admin+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

// runCLI runs the command line args with stdin and returns its exit code and what it
// printed (standard output, then standard error).
func runCLI(t testing.TB, stdin string, args ...string) (int, string) {
	t.Helper()
	var out, errw bytes.Buffer
	code := cli.Main(context.Background(), cli.Env{Version: "test", Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errw}, args)
	return code, out.String() + errw.String()
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
