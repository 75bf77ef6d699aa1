package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/lease"
	"github.com/web3gate/web3gate/store"
)

const testSecret = "whsec_0123456789abcdef0123456789abcdef"

// TestDeliversSignedEventsInOrder: each state change arrives once, signed, with the
// transaction's fields, in order per transaction.
func TestDeliversSignedEventsInOrder(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	rcv := newReceiver(t, testSecret, nil)
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL+"/hook?token=q", testSecret)
	s := startService(t, db, testConfig(), Deps{})
	id := newTx(t, db, "alice", 7)
	other := newTx(t, db, "bob", 8) // no endpoint: no event
	advance(t, db, id, "broadcast", "mined", "confirmed")
	advance(t, db, other, "broadcast")
	wait.Within(t, 10*time.Second, "3 deliveries", func() bool { return s.count(outcomeDelivered) == 3 })

	got := rcv.deliveries()
	var types []string
	for _, r := range got {
		if r.Verified != nil {
			t.Errorf("%s: signature: %v", r.Event.ID, r.Verified)
		}
		types = append(types, r.Event.Type)
		tx := r.Event.Transaction
		if tx.ID != fmt.Sprintf("tx_%d", id) || tx.Kind != "send" || tx.ChainID != 1337 || tx.Nonce != 7 || tx.Hash == nil ||
			tx.From != "0x00000000000000000000000000000000000000A1" || "transaction."+tx.State != r.Event.Type {
			t.Errorf("event %+v, transaction %+v", r.Event, tx)
		}
		if !strings.HasPrefix(r.Event.ID, "evt_") || r.Event.CreatedAt.IsZero() {
			t.Errorf("event id %q created %s", r.Event.ID, r.Event.CreatedAt)
		}
	}
	if want := []string{"transaction.broadcast", "transaction.mined", "transaction.confirmed"}; !slices.Equal(types, want) {
		t.Errorf("types %q, want %q", types, want)
	}
	for _, d := range deliveryLog(t, db, "wh_1") {
		if d.State != store.DeliveryDelivered || d.Attempts != 1 || d.LastStatus != 204 || d.DeliveredAt == nil {
			t.Errorf("log entry %+v", d)
		}
	}
}

// TestOrderWhileEarlierFails: while the first event of a transaction fails, its later events
// wait (and another transaction's go through); once it is delivered they follow in order.
func TestOrderWhileEarlierFails(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	var failures atomic.Int32
	var first int64
	rcv := newReceiver(t, testSecret, func(ev Event) int {
		if ev.Transaction.ID == fmt.Sprintf("tx_%d", first) && ev.Type == "transaction.broadcast" && failures.Add(1) <= 5 {
			return 500
		}
		return 200
	})
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	first = newTx(t, db, "alice", 1)
	second := newTx(t, db, "alice", 2)
	advance(t, db, first, "broadcast", "mined", "confirmed")
	advance(t, db, second, "broadcast", "mined")
	s := startService(t, db, testConfig(), Deps{})
	wait.Within(t, 10*time.Second, "5 deliveries", func() bool { return s.count(outcomeDelivered) == 5 })

	var firstTypes []string
	secondDone := -1
	firstDone := -1
	for i, r := range rcv.deliveries() {
		switch r.Event.Transaction.ID {
		case fmt.Sprintf("tx_%d", first):
			firstTypes = append(firstTypes, r.Event.Type)
			if r.Event.Type == "transaction.broadcast" && firstDone < 0 && len(firstTypes) == 6 {
				firstDone = i
			}
		case fmt.Sprintf("tx_%d", second):
			if r.Event.Type == "transaction.mined" {
				secondDone = i
			}
		}
	}
	want := []string{"transaction.broadcast", "transaction.broadcast", "transaction.broadcast", "transaction.broadcast",
		"transaction.broadcast", "transaction.broadcast", "transaction.mined", "transaction.confirmed"}
	if !slices.Equal(firstTypes, want) {
		t.Errorf("first transaction's arrivals %q, want %q (5 failures, then in order)", firstTypes, want)
	}
	if secondDone < 0 || secondDone > firstDone {
		t.Errorf("the second transaction's events (done at arrival %d) waited for the first's failures (delivered at %d)", secondDone, firstDone)
	}
	if n := s.count(outcomeFailed); n != 5 {
		t.Errorf("%d failed attempts counted, want 5", n)
	}
}

// TestDeadAfterMaxAttempts: an endpoint that always fails gets maxAttempts attempts, spaced
// by the backoff; the delivery is then dead, logged with its last status, and the next event
// of the transaction goes out.
func TestDeadAfterMaxAttempts(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	rcv := newReceiver(t, testSecret, func(ev Event) int {
		if ev.Type == "transaction.broadcast" {
			return 503
		}
		return 204
	})
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	cfg := testConfig()
	cfg.MaxAttempts, cfg.Backoff, cfg.MaxBackoff = 4, 50*time.Millisecond, 100*time.Millisecond
	s := startService(t, db, cfg, Deps{})
	id := newTx(t, db, "alice", 1)
	advance(t, db, id, "broadcast", "mined")
	wait.Within(t, 10*time.Second, "the mined event after the dead one", func() bool { return s.count(outcomeDelivered) == 1 })

	got := rcv.deliveries()
	if len(got) != 5 || got[4].Event.Type != "transaction.mined" {
		t.Fatalf("%d arrivals, want 4 attempts of broadcast then mined", len(got))
	}
	// Gaps: 50ms, 100ms, 100ms (doubled, then capped); the poll adds up to 20ms each.
	for i, min := range []time.Duration{50, 100, 100} {
		if gap := got[i+1].At.Sub(got[i].At); gap < min*time.Millisecond {
			t.Errorf("gap %d: %s, want at least %dms", i, gap, min)
		}
	}
	if s.count(outcomeDead) != 1 || s.count(outcomeFailed) != 3 {
		t.Errorf("dead %d failed %d, want 1 and 3", s.count(outcomeDead), s.count(outcomeFailed))
	}
	log := deliveryLog(t, db, "wh_1")
	dead := log[len(log)-1]
	if dead.State != store.DeliveryDead || dead.Attempts != 4 || dead.LastStatus != 503 || dead.LastError != "HTTP 503" {
		t.Errorf("dead delivery %+v", dead)
	}
}

func TestBackoff(t *testing.T) {
	s := &Service{cfg: Config{Backoff: time.Second, MaxBackoff: 10 * time.Second}}
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 40: 10 * time.Second} {
		if got := s.backoffAfter(failures); got != want {
			t.Errorf("backoffAfter(%d) = %s, want %s", failures, got, want)
		}
	}
}

// TestRefusesLoopbackUnlessAllowed: an endpoint on loopback (recorded behind the API's
// checks, as a name that resolves there would be) is never connected to without
// allowNetworks; the attempt fails with the policy's reason.
func TestRefusesLoopbackUnlessAllowed(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	rcv := newReceiver(t, testSecret, nil)
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	cfg := testConfig()
	cfg.AllowNetworks, cfg.MaxAttempts = nil, 2
	s := startService(t, db, cfg, Deps{})
	advance(t, db, newTx(t, db, "alice", 1), "broadcast")
	wait.Within(t, 10*time.Second, "the delivery dead", func() bool { return s.count(outcomeDead) == 1 })
	if n := len(rcv.deliveries()); n != 0 {
		t.Errorf("the loopback receiver got %d requests", n)
	}
	if d := deliveryLog(t, db, "wh_1")[0]; d.LastError != "destination address not allowed" || d.LastStatus != 0 {
		t.Errorf("refused delivery %+v", d)
	}
	s.stop()

	// With loopback allowed, the same endpoint gets the next event.
	cfg.AllowNetworks = []string{"127.0.0.0/8"}
	s = startService(t, db, cfg, Deps{})
	advance(t, db, newTx(t, db, "alice", 2), "broadcast")
	wait.Within(t, 10*time.Second, "the delivery", func() bool { return s.count(outcomeDelivered) == 1 })
}

// TestRedirectNotFollowed: a 3xx is a failure; the redirect's target is never asked.
func TestRedirectNotFollowed(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	target := newReceiver(t, testSecret, nil)
	rcv := newRedirector(t, testSecret, func(Event) int { return 307 }, target.srv.URL)
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	cfg := testConfig()
	cfg.MaxAttempts = 1
	s := startService(t, db, cfg, Deps{})
	advance(t, db, newTx(t, db, "alice", 1), "broadcast")
	wait.Within(t, 10*time.Second, "the delivery dead", func() bool { return s.count(outcomeDead) == 1 })
	if n := len(target.deliveries()); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
	if d := deliveryLog(t, db, "wh_1")[0]; d.LastStatus != 307 || !strings.Contains(d.LastError, "redirects are not followed") {
		t.Errorf("delivery %+v", d)
	}
}

// TestOneDelivererAtATime: two services on one store, each under its own replica's lease:
// only the holder delivers; when it stops, the other takes over. Both backends (lease rows on
// SQLite, advisory locks on PostgreSQL).
func TestOneDelivererAtATime(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			db := openStore(t, driver)
			rcv := newReceiver(t, testSecret, nil)
			addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
			hold := func(replica string) func(ctx context.Context, name string, job func(ctx context.Context)) {
				cfg := lease.Config{ReplicaID: replica, LeaseTimeout: 2 * time.Second}
				cfg.SetDefaults()
				l, err := lease.Open(cfg, db, lease.Deps{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				return l.Hold
			}
			a := startService(t, db, testConfig(), Deps{Hold: hold("a")})
			b := startService(t, db, testConfig(), Deps{Hold: hold("b")})
			for i := range 10 {
				advance(t, db, newTx(t, db, "alice", uint64(i)), "broadcast")
			}
			wait.Within(t, 20*time.Second, "10 deliveries", func() bool { return a.count(outcomeDelivered)+b.count(outcomeDelivered) == 10 })
			holder, standby := a, b
			if b.count(outcomeDelivered) > 0 {
				holder, standby = b, a
			}
			if holder.count(outcomeDelivered) != 10 || len(rcv.deliveries()) != 10 {
				t.Fatalf("a delivered %d, b %d, the receiver got %d: want one replica to deliver all 10 once",
					a.count(outcomeDelivered), b.count(outcomeDelivered), len(rcv.deliveries()))
			}
			holder.stop()
			for i := range 5 {
				advance(t, db, newTx(t, db, "alice", uint64(100+i)), "broadcast")
			}
			wait.Within(t, 20*time.Second, "the standby's 5 deliveries", func() bool { return standby.count(outcomeDelivered) == 5 })
			if n := len(rcv.deliveries()); n != 15 {
				t.Errorf("the receiver got %d deliveries, want 15", n)
			}
		})
	}
}

// TestNothingRunsWithoutEndpoints: without an enabled endpoint no lease is taken; the first
// endpoint starts the deliverer under the lease, and deleting the last one releases it.
func TestNothingRunsWithoutEndpoints(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	cfg := lease.Config{ReplicaID: "solo", LeaseTimeout: 2 * time.Second}
	cfg.SetDefaults()
	l, err := lease.Open(cfg, db, lease.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	s := startService(t, db, testConfig(), Deps{Hold: l.Hold})
	defer s.stop()
	time.Sleep(200 * time.Millisecond)
	if held := l.HeldLeases(); len(held) != 0 {
		t.Fatalf("leases held without an endpoint: %+v", held)
	}
	rcv := newReceiver(t, testSecret, nil)
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	advance(t, db, newTx(t, db, "alice", 1), "broadcast")
	wait.Within(t, 10*time.Second, "the delivery", func() bool { return s.count(outcomeDelivered) == 1 })
	if held := l.HeldLeases(); len(held) != 1 || held[0].Name != LeaseName {
		t.Errorf("leases held while delivering: %+v", held)
	}
	if err := db.Write(t.Context(), func(tx *store.DBTx) error { return tx.DeleteWebhook(t.Context(), "wh_1") }); err != nil {
		t.Fatal(err)
	}
	wait.Within(t, 10*time.Second, "the lease released", func() bool { return len(l.HeldLeases()) == 0 })
}

// TestFailureReasons: each kind of failed attempt is recorded with a short fixed reason that
// names neither the URL (its query may hold a token) nor the secret.
func TestFailureReasons(t *testing.T) {
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	for _, tc := range []struct {
		name, url, reason string
		status            int
	}{
		{"timeout", slow.URL, "timeout after 300ms", 0},
		{"refused", closedURL, "connection refused", 0},
		{"status", notFound.URL, "HTTP 404", 404},
		{"no host", "http://no-such-host.invalid/", "host not found", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openStore(t, store.DriverSQLite)
			addWebhook(t, db, "wh_1", "alice", tc.url+"/hook?token=url-token", testSecret)
			cfg := testConfig()
			cfg.MaxAttempts, cfg.Timeout = 1, 300*time.Millisecond
			s := startService(t, db, cfg, Deps{})
			advance(t, db, newTx(t, db, "alice", 1), "broadcast")
			wait.Within(t, 10*time.Second, "the delivery dead", func() bool { return s.count(outcomeDead) == 1 })
			d := deliveryLog(t, db, "wh_1")[0]
			if d.LastError != tc.reason || d.LastStatus != tc.status {
				t.Errorf("last error %q status %d, want %q %d", d.LastError, d.LastStatus, tc.reason, tc.status)
			}
			if strings.Contains(d.LastError, "url-token") || strings.Contains(d.LastError, testSecret) {
				t.Errorf("last error %q leaks the URL or the secret", d.LastError)
			}
		})
	}
}
