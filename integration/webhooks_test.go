package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/webhooks"
)

// hookArrival is one delivery as the test's receiver saw it.
type hookArrival struct {
	ev     webhooks.Event
	status int // what the receiver answered
	sigErr error
}

// hookReceiver is a webhook endpoint on loopback that answers 500 until told to recover.
type hookReceiver struct {
	srv    *httptest.Server
	secret string

	mu       sync.Mutex
	failing  bool
	arrivals []hookArrival
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	h := &hookReceiver{secret: secret, failing: true}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var ev webhooks.Event
		if err != nil || json.Unmarshal(body, &ev) != nil || r.Header.Get(webhooks.EventIDHeader) != ev.ID {
			t.Errorf("undecodable delivery %q (%v), event id header %q", body, err, r.Header.Get(webhooks.EventIDHeader))
		}
		a := hookArrival{ev: ev, status: http.StatusOK,
			sigErr: webhooks.Verify(secret, r.Header.Get(webhooks.SignatureHeader), body, 5*time.Minute, time.Now())}
		h.mu.Lock()
		if h.failing {
			a.status = http.StatusInternalServerError
		}
		h.arrivals = append(h.arrivals, a)
		h.mu.Unlock()
		w.WriteHeader(a.status)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) recover() {
	h.mu.Lock()
	h.failing = false
	h.mu.Unlock()
}

func (h *hookReceiver) all() []hookArrival {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.arrivals)
}

// txState is the state of the caller's transaction hash (GET /v1/transactions/{hash}).
func txState(t *testing.T, api string, hash common.Hash) string {
	t.Helper()
	status, body := get(t, api+"/v1/transactions/"+hash.Hex(), devAuth...)
	var out struct {
		Transaction struct{ State string } `json:"transaction"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("status of %s: HTTP %d %s", hash.Hex(), status, body)
	}
	return out.Transaction.State
}

// TestWebhooksEveryTransitionOnce: 100 eth_sendTransaction of the dev principal, whose
// endpoint answers 500 until web3gate was restarted on the same store: after deduplication by
// event id each request's transitions arrive exactly once, in order (broadcast, mined,
// confirmed, then abandoned: the embedded dev chain starts over at the restart), every
// signature verifies, and the receiver did see the failures. WEB3GATE_TEST_STORE=postgres runs
// it on PostgreSQL.
func TestWebhooksEveryTransitionOnce(t *testing.T) {
	const n = 100
	const secret = "whsec_test_0123456789abcdef0123456789"
	t.Setenv("WEB3GATE_TEST_WEBHOOK_SECRET", secret)
	rcv := newHookReceiver(t, secret)

	cfg := devConfig(t)
	for _, r := range [][2]string{
		{"finalityDepth: 12", "finalityDepth: 1"},
		{"maxInFlight: 16", "maxInFlight: 100"},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("config.yaml changed: no %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	head, section, ok := strings.Cut(cfg, "\nwebhooks:\n")
	if !ok {
		t.Fatal("config.yaml changed: no webhooks section")
	}
	for _, r := range [][2]string{
		{"backoff: 1s", "backoff: 100ms"},
		{"maxBackoff: 10m", "maxBackoff: 500ms"},
		{"maxAttempts: 12", "maxAttempts: 100"},
		{"pollInterval: 500ms", "pollInterval: 50ms"},
		{"allowNetworks: []", `allowNetworks: ["127.0.0.0/8"]`},
		{"endpoints: []", "endpoints:\n    - {principal: dev, url: \"" + rcv.srv.URL + "/hooks\", secretEnv: WEB3GATE_TEST_WEBHOOK_SECRET}"},
	} {
		if !strings.Contains(section, r[0]) {
			t.Fatalf("config.yaml changed: no %q under webhooks", r[0])
		}
		section = strings.Replace(section, r[0], r[1], 1)
	}
	cfg = head + "\nwebhooks:\n" + section

	dir := t.TempDir()
	ts := startServerIn(t, cfg, dir, io.Discard)
	url := ts.API + "/v1/web3/mainnet"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	hashes := make([]common.Hash, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := devAccount3
			if i%2 == 1 {
				from = devAccount4
			}
			r := rpcCall(t, client, url, "eth_sendTransaction", []any{transfer(from, int64(i+1))})
			if r.Error != nil || json.Unmarshal(r.Result, &hashes[i]) != nil {
				t.Errorf("send %d: HTTP %d %+v %s", i, r.Status, r.Error, r.Result)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Every request confirmed (one block on top): a block more whenever one is missing.
	deadline := time.Now().Add(60 * time.Second)
	for {
		confirmed := 0
		for _, h := range hashes {
			if txState(t, ts.API, h) == "confirmed" {
				confirmed++
			}
		}
		if confirmed == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d confirmed within 60s", confirmed, n)
		}
		// The dev principal holds every dev account: this block's transfer has events too,
		// which the checks below leave aside (they follow the 100 requests' hashes).
		rpcCall(t, client, url, "eth_sendTransaction", []any{transfer(devAccount4, 1)})
		time.Sleep(300 * time.Millisecond)
	}
	failedBefore := len(rcv.all())
	if failedBefore == 0 {
		t.Fatal("no delivery was attempted before the restart")
	}

	// Restart on the same store, the endpoint answering 2xx from now on.
	ts.stop()
	rcv.recover()
	ts = startServerIn(t, cfg, dir, io.Discard)
	restarted := time.Now()

	// Each request goes broadcast, mined, confirmed, then abandoned (the dev chain started
	// over); one that the confirmer saw mined before its broadcast was recorded (the dev chain
	// mines at once) went from signed to mined, with no broadcast event. The store's own
	// record of the events is compared below.
	want := []string{"transaction.mined", "transaction.confirmed", "transaction.abandoned"}
	byHash := map[string]bool{}
	for _, h := range hashes {
		byHash[strings.ToLower(h.Hex())] = true
	}
	// acked are the acknowledged events per request (transaction.id), in arrival order, each
	// event id once.
	acked := func() (map[string][]webhooks.Event, map[string]string) {
		out := map[string][]webhooks.Event{}
		hashOf := map[string]string{} // request id → hash
		seen := map[string]bool{}
		for _, a := range rcv.all() {
			if a.status != http.StatusOK || seen[a.ev.ID] {
				continue
			}
			seen[a.ev.ID] = true
			id := a.ev.Transaction.ID
			out[id] = append(out[id], a.ev)
			if a.ev.Transaction.Hash != nil {
				hashOf[id] = strings.ToLower(*a.ev.Transaction.Hash)
			}
		}
		return out, hashOf
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		got, hashOf := acked()
		complete := 0
		for id, evs := range got {
			if byHash[hashOf[id]] && len(evs) > 0 && evs[len(evs)-1].Type == want[len(want)-1] {
				complete++
			}
		}
		if complete == n {
			t.Logf("every request's last event acknowledged %s after the restart", time.Since(restarted).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			for id, evs := range got {
				if byHash[hashOf[id]] && len(evs) < len(want) {
					var types []string
					for _, ev := range evs {
						types = append(types, ev.ID+":"+ev.Type)
					}
					t.Logf("request %s: acknowledged %q", id, types)
				}
			}
			t.Fatalf("%d of %d requests have their last event acknowledged within 60s after the restart", complete, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Let any duplicate in flight land before the final look.
	time.Sleep(300 * time.Millisecond)

	got, hashOf := acked()
	db := openTestStore(t, dir)
	requests, noBroadcast := 0, 0
	for id, evs := range got {
		if !byHash[hashOf[id]] {
			continue // a block-making transfer
		}
		requests++
		var types []string
		for i, ev := range evs {
			types = append(types, ev.Type)
			if i > 0 && eventSeq(t, ev.ID) <= eventSeq(t, evs[i-1].ID) {
				t.Errorf("request %s: %s arrived after %s", id, ev.ID, evs[i-1].ID)
			}
			if ev.Transaction.ChainID != 1337 || ev.Transaction.Kind != "send" || ev.Transaction.From == "" || ev.Transaction.State != strings.TrimPrefix(ev.Type, "transaction.") {
				t.Errorf("request %s: event %+v", id, ev)
			}
		}
		recorded := recordedEvents(t, db, id)
		if !slices.Equal(types, recorded) || !slices.Equal(slices.DeleteFunc(slices.Clone(types), func(s string) bool { return s == "transaction.broadcast" }), want) {
			t.Errorf("request %s (%s): acknowledged %q, the store recorded %q; want each once, in order, ending %q", id, hashOf[id], types, recorded, want)
		}
		if len(recorded) == 3 {
			noBroadcast++
		}
	}
	if requests != n {
		t.Errorf("%d requests had events, want %d", requests, n)
	}
	failures := 0
	for _, a := range rcv.all() {
		if a.sigErr != nil {
			t.Errorf("event %s: signature: %v", a.ev.ID, a.sigErr)
		}
		if a.status != http.StatusOK {
			failures++
		}
	}
	if failures == 0 {
		t.Error("the receiver answered no 500")
	}
	// The restarted server delivered every event (the first one's attempts all failed).
	if got := metric(t, ts.Admin, `web3gate_webhook_deliveries_total{outcome="delivered"}`); got < n*float64(len(want)) {
		t.Errorf("delivered %v after the restart, want at least %d", got, n*len(want))
	}
	wait.For(t, "no delivery pending", func() bool { return metric(t, ts.Admin, "web3gate_webhook_pending") == 0 })
	if got := metric(t, ts.Admin, "web3gate_webhook_delivery_lag_seconds_count"); got < n*float64(len(want)) {
		t.Errorf("lag observed %v times, want at least %d", got, n*len(want))
	}
	t.Logf("%d deliveries answered 500 before the restart, %d arrivals in all; %d requests mined before their broadcast was recorded",
		failures, len(rcv.all()), noBroadcast)
}

// openTestStore opens the store of the server state in dir, beside the running server.
func openTestStore(t *testing.T, dir string) *store.DB {
	t.Helper()
	var c store.Config
	setTestStore(t, &c, dir)
	c.SetDefaults()
	db, err := store.Open(context.Background(), c, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// recordedEvents are the types of the events the store recorded for request id (tx_<n>).
func recordedEvents(t *testing.T, db *store.DB, id string) []string {
	t.Helper()
	var txID int64
	if _, err := fmt.Sscanf(id, "tx_%d", &txID); err != nil {
		t.Fatalf("request id %q", id)
	}
	ctx := context.Background()
	var types []string
	if err := db.Read(ctx, func(tx *store.DBTx) error {
		evs, err := tx.WebhookEvents(ctx, txID)
		for _, e := range evs {
			types = append(types, "transaction."+e.State)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return types
}

func eventSeq(t *testing.T, id string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(id, "evt_%d", &n); err != nil {
		t.Fatalf("event id %q", id)
	}
	return n
}
