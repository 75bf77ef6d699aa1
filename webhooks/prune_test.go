package webhooks

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/store"
)

// TestRetention: the deliverer deletes the deliveries that finished more than
// webhooks.retention ago and then their events; a request whose delivery keeps failing keeps
// its events and pending deliveries, and they still go out in order once the endpoint
// answers. retention 0 deletes nothing.
func TestRetention(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) { testRetention(t, driver) })
	}
}

func testRetention(t *testing.T, driver string) {
	db := openStore(t, driver)
	var failing atomic.Bool
	failing.Store(true)
	var held int64
	rcv := newReceiver(t, testSecret, func(ev Event) int {
		if ev.Transaction.ID == fmt.Sprintf("tx_%d", held) && failing.Load() {
			return 500
		}
		return 204
	})
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	done := newTx(t, db, "alice", 1)
	held = newTx(t, db, "alice", 2)
	advance(t, db, done, "broadcast", "mined", "confirmed")
	advance(t, db, held, "broadcast", "mined")

	var skew atomic.Int64 // the service's clock runs this far ahead
	cfg := testConfig()
	keep := time.Hour
	cfg.Retention = &keep
	s := startTuned(t, db, cfg, Deps{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }},
		func(s *Service) { s.pruneEvery = 20 * time.Millisecond })
	pruned := func(table string) int { return int(testutil.ToFloat64(s.m.pruned.WithLabelValues(table))) }
	wait.Within(t, 10*time.Second, "3 delivered, 2 failures", func() bool { return s.count(outcomeDelivered) == 3 && s.count(outcomeFailed) >= 2 })
	time.Sleep(100 * time.Millisecond) // rounds of retention ran: nothing is old enough
	if pruned("deliveries") != 0 || pruned("events") != 0 {
		t.Fatalf("pruned %d deliveries and %d events younger than retention", pruned("deliveries"), pruned("events"))
	}

	skew.Store(int64(2 * time.Hour))
	wait.Within(t, 10*time.Second, "the delivered request pruned", func() bool { return pruned("events") == 3 })
	if n := pruned("deliveries"); n != 3 {
		t.Errorf("pruned %d deliveries, want 3 (the delivered request's)", n)
	}
	if evs := events(t, db, done); len(evs) != 0 {
		t.Errorf("the delivered request's events are kept: %+v", evs)
	}
	var states []string
	for _, e := range events(t, db, held) {
		states = append(states, e.State)
	}
	if want := []string{"broadcast", "mined"}; !slices.Equal(states, want) {
		t.Errorf("the failing request's events %q, want %q", states, want)
	}
	log := deliveryLog(t, db, "wh_1")
	if len(log) != 2 || log[0].State != store.DeliveryPending || log[1].State != store.DeliveryPending {
		t.Fatalf("deliveries left %+v, want the failing request's two, pending", log)
	}

	failing.Store(false)
	wait.Within(t, 10*time.Second, "the failing request delivered", func() bool { return s.count(outcomeDelivered) == 5 })
	var order []string
	for _, r := range rcv.deliveries() {
		// (not Verified: the service's clock is hours ahead, so its timestamps are out of tolerance)
		if r.Event.Transaction.ID == fmt.Sprintf("tx_%d", held) {
			order = append(order, r.Event.Type)
		}
	}
	if order[len(order)-1] != "transaction.mined" || slices.Index(order, "transaction.mined") != len(order)-1 {
		t.Errorf("the failing request's arrivals %q: its mined event went before its broadcast was acknowledged", order)
	}
	// Delivered now, and older than retention by the service's clock a moment later.
	skew.Store(int64(4 * time.Hour))
	wait.Within(t, 10*time.Second, "everything pruned", func() bool { return pruned("events") == 5 && pruned("deliveries") == 5 })
}

// TestRetentionZeroKeeps: retention 0 keeps every row, however old.
func TestRetentionZeroKeeps(t *testing.T) {
	db := openStore(t, store.DriverSQLite)
	rcv := newReceiver(t, testSecret, nil)
	addWebhook(t, db, "wh_1", "alice", rcv.srv.URL, testSecret)
	id := newTx(t, db, "alice", 1)
	advance(t, db, id, "broadcast", "mined")
	cfg := testConfig()
	zero := time.Duration(0)
	cfg.Retention = &zero
	var skew atomic.Int64
	s := startTuned(t, db, cfg, Deps{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }},
		func(s *Service) { s.pruneEvery = 20 * time.Millisecond })
	wait.Within(t, 10*time.Second, "2 delivered", func() bool { return s.count(outcomeDelivered) == 2 })
	skew.Store(int64(100 * 365 * 24 * time.Hour))
	time.Sleep(200 * time.Millisecond)
	if n := len(deliveryLog(t, db, "wh_1")); n != 2 || len(events(t, db, id)) != 2 {
		t.Errorf("retention 0: %d deliveries and %d events left, want 2 and 2", n, len(events(t, db, id)))
	}
}

func events(t *testing.T, db *store.DB, txID int64) []store.WebhookEvent {
	t.Helper()
	ctx := context.Background()
	var evs []store.WebhookEvent
	if err := db.Read(ctx, func(tx *store.DBTx) error {
		var err error
		evs, err = tx.WebhookEvents(ctx, txID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}
