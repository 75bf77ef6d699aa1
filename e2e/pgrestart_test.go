package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/testengine"
)

// outcome is what one request got while the store came and went.
type outcome struct {
	kind   string // send, nonce, status, block
	phase  string
	took   time.Duration
	status int
	code   int    // JSON-RPC error code, 0 for a result (REST: 0)
	msg    string // the error's message, or the transport error
	hash   string // a send's result
}

// pgStoreTimeouts are the store timeouts of the restart test's replica.
const pgStoreTimeouts = `  connectTimeout: 2s
  statementTimeout: 5s
  transactionTimeout: 5s
`

// requestBound is the longest any request may take while the store is stopped, restarting or
// frozen: transactionTimeout (a request meets at most one store call that times out: its
// failure ends the request), with room for a send's chain calls and a loaded machine. The
// freeze lasts longer, so that a request held until the thaw exceeds it.
const (
	requestBound = 11 * time.Second
	freezeFor    = 14 * time.Second
)

// TestPostgresRestartUnderLoad: one replica on a private PostgreSQL serving a steady stream of
// eth_sendTransaction and reads (the account's pending nonce and a transaction's status, both
// answered from the store, and eth_blockNumber, which needs no store) while PostgreSQL is
// stopped (fast: sessions ended), started again, stopped as by a crash (immediate), started
// again, and frozen (SIGSTOP: connections open, nothing answers) then thawed. Meanwhile every
// request ends within the store's timeouts with a result or a JSON-RPC error; the store's
// failures are -32002 "store unavailable" (HTTP 503), never a 500 or a hang; after each restart
// requests succeed again without restarting web3gate, and every hash returned is mined with
// the account's nonces contiguous.
func TestPostgresRestartUnderLoad(t *testing.T) {
	const chainID = 31337
	pg := testengine.PrivatePostgres(t)
	node := anvil.Start(t, chainID)
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	// The account's in-flight cap is not what this test is about: high enough that a confirmer
	// catching up after an outage on a slow machine never makes a send wait for a slot
	// (inFlightWait is longer than requestBound).
	cfg := replicaConfig(pg.DSN(), chainID, "{maxInFlight: 100000, pollInterval: 100ms, rebroadcastAfter: 2s, broadcastTimeout: 3s}", "", node.URL)
	cfg = strings.Replace(cfg, "  maxConns: 8\n", "  maxConns: 8\n"+pgStoreTimeouts, 1)
	acct := newAccount(t, writeConfig(t, t.TempDir(), cfg))
	fund(t, node, acct)
	g := startGateway(t, cfg)
	waitReady(t, g)
	url := g.API + "/v1/web3/mainnet"

	var (
		mu       sync.Mutex
		outcomes []outcome
		phase    atomic.Value
		lastHash atomic.Value
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	phase.Store("up")
	lastHash.Store("")
	record := func(o outcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	rpcOutcome := func(kind string, began time.Time, code int, r rpcReply, err error) outcome {
		o := outcome{kind: kind, phase: phase.Load().(string), took: time.Since(began), status: code}
		switch {
		case err != nil:
			o.code, o.msg = -1, err.Error()
		case r.Error != nil:
			o.code, o.msg = r.Error.Code, r.Error.Message
		}
		return o
	}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				began := time.Now()
				code, r, err := callH(url, nil, "eth_sendTransaction", txObject(acct, (w+i)%2 == 0, nil))
				o := rpcOutcome("send", began, code, r, err)
				if o.code == 0 && json.Unmarshal(r.Result, &o.hash) != nil {
					o.code, o.msg = -1, "result is not a hash: "+string(r.Result)
				}
				if o.hash != "" {
					lastHash.Store(o.hash)
				}
				record(o)
				if o.code != 0 {
					time.Sleep(20 * time.Millisecond) // a failing store answers at once: do not spin
				}
			}
		})
	}
	wg.Go(func() {
		for !stop.Load() {
			began := time.Now()
			code, r, err := callH(url, nil, "eth_getTransactionCount", acct.Hex(), "pending")
			record(rpcOutcome("nonce", began, code, r, err))
			began = time.Now()
			code, r, err = callH(url, nil, "eth_blockNumber")
			record(rpcOutcome("block", began, code, r, err))
			if h := lastHash.Load().(string); h != "" {
				began = time.Now()
				status, body, err := getTransaction(g, h)
				o := outcome{kind: "status", phase: phase.Load().(string), took: time.Since(began), status: status}
				if err != nil {
					o.code, o.msg = -1, err.Error()
				} else if status != 200 {
					var e struct{ Error struct{ Message string } }
					if json.Unmarshal([]byte(body), &e) != nil || e.Error.Message == "" {
						o.msg = "not the REST error object: " + body
					} else {
						o.msg = e.Error.Message
					}
				}
				record(o)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	// waitSend waits until a send succeeds after the store came back.
	waitSend := func(since time.Time) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			for _, o := range outcomes[max(0, len(outcomes)-200):] {
				if o.kind == "send" && o.code == 0 && o.phase == phase.Load().(string) {
					mu.Unlock()
					return
				}
			}
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
		stop.Store(true)
		wg.Wait()
		t.Fatalf("no send succeeded within 60s of the store's return (%v)", time.Since(since))
	}
	steady := func(p string, d time.Duration) {
		phase.Store(p)
		began := time.Now()
		waitSend(began)
		time.Sleep(d)
	}

	// /readyz follows the store: 503 while it cannot serve (a load balancer sends the replica
	// no new requests), 200 again once it does.
	ready := func(want int, when, says string) {
		t.Helper()
		if code, body := httpGet(t, g.Admin+"/readyz"); code != want || !strings.Contains(body, says) {
			t.Errorf("readyz %s: %d %s, want %d with %q", when, code, body, want, says)
		}
	}
	steady("up", 3*time.Second)
	ready(200, "up", `"status":"ok"`)
	for _, mode := range []string{"fast", "immediate"} {
		phase.Store("stopped " + mode)
		pg.Stop(mode)
		time.Sleep(4 * time.Second)
		ready(503, "stopped "+mode, "store unavailable")
		pg.Start()
		steady("restarted after "+mode, 3*time.Second)
		ready(200, "restarted after "+mode, `"status":"ok"`)
	}
	phase.Store("frozen")
	pg.Freeze()
	time.Sleep(freezeFor)
	ready(503, "frozen", `"status":"unavailable"`)
	pg.Thaw()
	steady("thawed", 3*time.Second)
	ready(200, "thawed", `"status":"ok"`)
	stop.Store(true)
	wg.Wait()

	select {
	case <-g.exited:
		t.Fatalf("web3gate exited: %v", g.exitErr)
	default:
	}
	logs := g.logs.String()
	if strings.Contains(logs, "panic") {
		t.Fatalf("web3gate logged a panic")
	}
	// Each outage is logged once, with its end; nothing is an internal error. A store that
	// answers a call later than store.transactionTimeout is unavailable too (the call fails
	// with -32002): on a machine loaded by other tests the first minutes after a restart can
	// hold one more such episode, logged with its end like the others.
	down := strings.Count(logs, `"msg":"store unavailable: `)
	up := strings.Count(logs, `"msg":"store available again"`)
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"store unavailable: `) || strings.Contains(line, `"msg":"store available again"`) {
			t.Log(line) // what each outage began with, and how long it lasted
		}
	}
	if down < 3 || down > 5 || up != down {
		t.Errorf("web3gate logged %d outages and %d ends of one, want one of each per outage (3, and at most 2 more of load)", down, up)
	}
	if n := strings.Count(logs, `"msg":"internal error"`); n > 0 {
		t.Errorf("web3gate logged %d internal errors", n)
	}
	t.Logf("web3gate's log lines by message:\n%s", logSummary(logs))

	// What each phase got, by kind and answer.
	type key struct{ phase, kind, answer string }
	counts := map[key]int{}
	var slowest time.Duration
	var problems []string
	var hashes []string
	for _, o := range outcomes {
		answer := "ok"
		switch {
		case o.code == -1:
			answer = "transport: " + o.msg
		case o.code != 0:
			answer = fmt.Sprintf("HTTP %d %d %s", o.status, o.code, firstWords(o.msg))
		case o.status != 200:
			answer = fmt.Sprintf("HTTP %d %s", o.status, firstWords(o.msg))
		}
		counts[key{o.phase, o.kind, answer}]++
		slowest = max(slowest, o.took)
		if o.hash != "" {
			hashes = append(hashes, o.hash)
		}
		if o.took > requestBound {
			problems = append(problems, fmt.Sprintf("%s (%s) took %v", o.kind, o.phase, o.took))
		}
		if answer != "ok" && !storeUnavailable(o) {
			problems = append(problems, fmt.Sprintf("%s (%s): %s", o.kind, o.phase, answer))
		}
		if answer != "ok" && (o.phase == "up" || o.kind == "block") {
			problems = append(problems, fmt.Sprintf("%s (%s) failed without a store outage to blame: %s", o.kind, o.phase, answer))
		}
	}
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%-26s %-6s %5d  %s", k.phase, k.kind, n, k.answer))
	}
	sort.Strings(lines)
	t.Logf("%d requests, the slowest %v:\n%s", len(outcomes), slowest.Round(time.Millisecond), strings.Join(lines, "\n"))
	if len(problems) > 0 {
		t.Fatalf("%d requests answered otherwise than with a result or a store-unavailable error within %v; first: %s",
			len(problems), requestBound, strings.Join(problems[:min(5, len(problems))], "; "))
	}

	// Every hash returned is mined, and the account's nonces have no gap.
	checkDistinct(t, hashes)
	rs := &replicaSet{node: node, dsn: pg.DSN(), acct: acct, gws: []*gateway{g}}
	dump := func(missing []string) { dumpReplicaState(t, rs, missing) }
	waitMined(t, node, acct, hashes, 60*time.Second, nil, dump)
	n := waitSettled(t, rs, 60*time.Second, dump)
	t.Logf("%d hashes returned; %d transactions mined from the account", len(hashes), n)
	checkMinedNonces(t, node, acct, 0, n, hashes)
}

// storeUnavailable reports whether o is the answer of a request the store could not serve:
// -32002 "store unavailable" with HTTP 503 (JSON-RPC), or HTTP 503 (REST).
func storeUnavailable(o outcome) bool {
	if o.status != http.StatusServiceUnavailable || !strings.Contains(o.msg, "store unavailable") {
		return false
	}
	return o.kind == "status" || o.code == -32002
}

func firstWords(s string) string {
	if len(s) > 90 {
		return s[:90] + "…"
	}
	return s
}

// getTransaction is GET /v1/transactions/{hash} with the e2e credentials.
func getTransaction(g *gateway, hash string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, g.API+"/v1/transactions/"+hash, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-API-Key", "e2e")
	req.Header.Set("Authorization", "Bearer e2e-token")
	resp, err := replicaClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// logSummary counts web3gate's JSON log lines by level and message.
func logSummary(logs string) string {
	counts := map[string]int{}
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg != "" {
			counts[fmt.Sprintf("%-5s %s", l.Level, l.Msg)]++
		}
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%6d %s", n, k))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
