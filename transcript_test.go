package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// testServer is a web3gate started in process by run() on loopback ports.
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
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Admin.Listen = "127.0.0.1:0"
	setTestStore(t, &cfg.Store, dir)
	cfg.Wallet.Keys.Dir = filepath.Join(dir, "keystore")
	cfg.Auth.OAuth.SigningKeyFile = filepath.Join(dir, "jwt-signing-key.pem")
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cfg, logw, func(api, admin net.Addr) { addrs <- [2]net.Addr{api, admin} })
	}()
	var ts *testServer
	select {
	case a := <-addrs:
		ts = &testServer{API: "http://" + a[0].String(), Admin: "http://" + a[1].String()}
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

// devConfig is the shipped config.yaml with test-sized limits.
// deploymentConfig is devConfig with a 1 MiB request body: room for contract deployments.
func deploymentConfig(t testing.TB) string {
	t.Helper()
	return strings.Replace(devConfig(t), "maxBodyBytes: 4096", "maxBodyBytes: 1048576", 1)
}

func devConfig(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile("config.yaml")
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

// TestTranscripts replays testdata/*.rpc through the whole compiled chain of a server on the
// embedded dev chain. Each file is a conversation:
//
//	// a comment
//	@path /v1/web3/chains/1337      the path of the following requests (default /v1/web3/mainnet)
//	@method GET                     the HTTP method (default POST)
//	@header Name: value             set a request header ("Name:" alone removes it)
//	@reset                          back to the defaults (dev credentials, JSON content type)
//	--> {"jsonrpc":"2.0",...}       send this body
//	--> @size 5000                  send a JSON-RPC body padded to 5000 bytes
//	<-- 200 {"jsonrpc":"2.0",...}   expect this status and JSON body
//	<-- 204                         expect this status and an empty body
//
// In an expected body the string "*" matches any value and "0x*" any 0x-prefixed string.
//
// The files of testdata/strict run against a server in the strict form of the transaction
// methods (wallet.transactions.fill: false), the others against the shipped form.
func TestTranscripts(t *testing.T) {
	for _, set := range []struct {
		glob, config string
	}{
		{"testdata/*.rpc", devConfig(t)},
		{"testdata/strict/*.rpc", strictConfig(t)},
	} {
		files, err := filepath.Glob(set.glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("no transcripts %s: %v", set.glob, err)
		}
		ts := startServer(t, set.config)
		for _, f := range files {
			t.Run(strings.TrimPrefix(f, "testdata/"), func(t *testing.T) { runTranscript(t, ts.API, f) })
		}
	}
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

func defaultHeaders() map[string]string {
	return map[string]string{
		"Content-Type":  "application/json",
		"X-API-Key":     config.DevClientID,
		"Authorization": "Bearer " + config.DevToken,
	}
}

func runTranscript(t *testing.T, base, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path, method, headers := "/v1/web3/mainnet", http.MethodPost, defaultHeaders()
	var (
		got     *http.Response
		gotBody []byte
		sent    string
		lineNo  int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		where := fmt.Sprintf("%s:%d", file, lineNo)
		switch {
		case line == "" || strings.HasPrefix(line, "//"):
		case strings.HasPrefix(line, "@path "):
			path = strings.TrimSpace(line[len("@path "):])
		case strings.HasPrefix(line, "@method "):
			method = strings.TrimSpace(line[len("@method "):])
		case strings.HasPrefix(line, "@header "):
			name, value, _ := strings.Cut(line[len("@header "):], ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if value == "" {
				delete(headers, name)
			} else {
				headers[name] = value
			}
		case line == "@reset":
			path, method, headers = "/v1/web3/mainnet", http.MethodPost, defaultHeaders()
		case strings.HasPrefix(line, "-->"):
			sent = strings.TrimSpace(line[3:])
			body := []byte(sent)
			if n, ok := strings.CutPrefix(sent, "@size "); ok {
				size, _ := strconv.Atoi(n)
				body = paddedRequest(size)
			}
			got, gotBody = send(t, where, base+path, method, headers, body)
		case strings.HasPrefix(line, "<--"):
			if got == nil {
				t.Fatalf("%s: expectation without a request", where)
			}
			status, want, _ := strings.Cut(strings.TrimSpace(line[3:]), " ")
			if strconv.Itoa(got.StatusCode) != status {
				t.Errorf("%s: sent %s\n  status %d, want %s (body %s)", where, sent, got.StatusCode, status, gotBody)
			}
			if err := matchJSON(strings.TrimSpace(want), gotBody); err != nil {
				t.Errorf("%s: sent %s\n  %v\n  got  %s\n  want %s", where, sent, err, gotBody, want)
			}
			got = nil
		default:
			t.Fatalf("%s: cannot read line %q", where, line)
		}
	}
	if got != nil {
		t.Errorf("%s: last request has no expectation", file)
	}
}

func send(t *testing.T, where, url, method string, headers map[string]string, body []byte) (*http.Response, []byte) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: read body: %v", where, err)
	}
	return resp, b
}

func paddedRequest(size int) []byte {
	head, tail := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["`, `"]}`
	pad := size - len(head) - len(tail)
	return []byte(head + strings.Repeat("a", max(pad, 0)) + tail)
}

// matchJSON compares got with the expected JSON text, where "*" matches anything and "0x*"
// any 0x-prefixed string. An empty want expects an empty body.
func matchJSON(want string, got []byte) error {
	if want == "" {
		if len(bytes.TrimSpace(got)) != 0 {
			return fmt.Errorf("want an empty body")
		}
		return nil
	}
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("bad expectation: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("body is not JSON: %v", err)
	}
	return matchValue("$", w, g)
}

func matchValue(at string, w, g any) error {
	if s, ok := w.(string); ok {
		switch {
		case s == "*":
			return nil
		case s == "0x*":
			if gs, ok := g.(string); ok && strings.HasPrefix(gs, "0x") && len(gs) > 2 {
				return nil
			}
			return fmt.Errorf("%s: %v is not a 0x string", at, g)
		}
	}
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: object mismatch", at)
		}
		for k, v := range wv {
			gvv, ok := gv[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", at, k)
			}
			if err := matchValue(at+"."+k, v, gvv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: array mismatch", at)
		}
		for i := range wv {
			if err := matchValue(fmt.Sprintf("%s[%d]", at, i), wv[i], gv[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("%s: %v != %v", at, g, w)
	}
	return nil
}
