package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testengine"
)

func testWebhook(id, principal, url string) Webhook {
	return Webhook{ID: id, Principal: principal, URL: url, Secret: "whsec_" + id, Source: WebhookSourceAdmin, CreatedAt: time.Now()}
}

// addWebhooks inserts the endpoints ws in one write.
func addWebhooks(t *testing.T, db *DB, ws ...Webhook) {
	t.Helper()
	err := db.Write(context.Background(), func(dbtx *DBTx) error {
		for _, w := range ws {
			if err := dbtx.InsertWebhook(context.Background(), w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// insertSigned records a transaction of principal at nonce and signs it (reserved → signed:
// no event), returning its id.
func insertSigned(t *testing.T, db *DB, principal string, nonce uint64) int64 {
	t.Helper()
	ctx := context.Background()
	r := testRecord(1, addrN(7), nonce)
	r.Principal = principal
	err := db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.InsertTx(ctx, r); err != nil {
			return err
		}
		return dbtx.SetSigned(ctx, r.ID, []byte{1, byte(nonce)}, common.BigToHash(big.NewInt(int64(nonce)+1000)), StateSigned)
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func setState(t *testing.T, db *DB, id int64, from, to string) {
	t.Helper()
	ctx := context.Background()
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.SetState(ctx, id, []string{from}, to, "") }); err != nil {
		t.Fatalf("%s → %s: %v", from, to, err)
	}
}

func eventStates(t *testing.T, db *DB, txID int64) []string {
	t.Helper()
	ctx := context.Background()
	var evs []WebhookEvent
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		evs, err = dbtx.WebhookEvents(ctx, txID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	states := []string{}
	for i, e := range evs {
		if i > 0 && e.Seq <= evs[i-1].Seq {
			t.Errorf("events not ordered by seq: %d after %d", e.Seq, evs[i-1].Seq)
		}
		states = append(states, e.State)
	}
	return states
}

func dueDeliveries(t *testing.T, db *DB, at time.Time) []WebhookDelivery {
	t.Helper()
	ctx := context.Background()
	var ds []WebhookDelivery
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		ds, err = dbtx.DueWebhookDeliveries(ctx, at, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestWebhookTrigger: a state change of a transaction writes an event (and a delivery per
// enabled endpoint of its principal) only for the states callers see, only when the state
// really changed, and only for principals with an enabled endpoint; events are ordered by seq
// and snapshot the row.
func TestWebhookTrigger(t *testing.T) { forEachBackend(t, testWebhookTrigger) }

func testWebhookTrigger(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addWebhooks(t, db, testWebhook("wh_a", "alice", "https://a.example/1"), testWebhook("wh_b", "alice", "https://a.example/2"))

	alice := insertSigned(t, db, "alice", 0)
	bob := insertSigned(t, db, "bob", 1)
	for _, id := range []int64{alice, bob} {
		setState(t, db, id, StateSigned, StateBroadcast)
		setState(t, db, id, StateBroadcast, StateBroadcast) // not a change
	}
	for _, id := range []int64{alice, bob} {
		if err := db.Write(ctx, func(dbtx *DBTx) error {
			r, err := dbtx.TxByID(ctx, id)
			if err != nil {
				return err
			}
			_, err = dbtx.SetMined(ctx, 1, r.Hash, 42, common.HexToHash("0xb10c"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Write(ctx, func(dbtx *DBTx) error { _, err := dbtx.Confirm(ctx, 1, 42); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := eventStates(t, db, alice), []string{"broadcast", "mined", "confirmed"}; !slices.Equal(got, want) {
		t.Errorf("alice's events %q, want %q", got, want)
	}
	if got := eventStates(t, db, bob); len(got) != 0 {
		t.Errorf("bob (no endpoint) has events %q", got)
	}

	var evs []WebhookEvent
	if err := db.Read(ctx, func(dbtx *DBTx) error { var err error; evs, err = dbtx.WebhookEvents(ctx, alice); return err }); err != nil {
		t.Fatal(err)
	}
	mined := evs[1]
	if mined.BlockNumber == nil || *mined.BlockNumber != 42 || mined.BlockHash != common.HexToHash("0xb10c").Hex() ||
		mined.Hash != common.BigToHash(big.NewInt(1000)).Hex() || mined.ChainID != 1 || mined.From != "0x"+common.Bytes2Hex(addrN(7).Bytes()) ||
		mined.Nonce != 0 || mined.Kind != KindSend || mined.Principal != "alice" || mined.CreatedAt.IsZero() {
		t.Errorf("mined event %+v", mined)
	}

	// Two endpoints: two deliveries per event; each endpoint's first event of the
	// transaction is due, the later ones wait behind it.
	due := dueDeliveries(t, db, time.Now().Add(time.Second))
	var got []string
	for _, d := range due {
		got = append(got, d.WebhookID+":"+d.Event.State)
		if d.URL == "" || d.Secret != "whsec_"+d.WebhookID || d.Attempts != 0 || d.State != DeliveryPending {
			t.Errorf("due delivery %+v", d)
		}
	}
	slices.Sort(got)
	if want := []string{"wh_a:broadcast", "wh_b:broadcast"}; !slices.Equal(got, want) {
		t.Errorf("due %q, want %q", got, want)
	}

	// Disabled (no longer configured): no event for later changes.
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		for _, id := range []string{"wh_a", "wh_b"} {
			if _, err := dbtx.ExecContext(ctx, `UPDATE webhooks SET enabled = 0 WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	second := insertSigned(t, db, "alice", 2)
	setState(t, db, second, StateSigned, StateBroadcast)
	if got := eventStates(t, db, second); len(got) != 0 {
		t.Errorf("events %q with every endpoint disabled", got)
	}
	if got := dueDeliveries(t, db, time.Now().Add(time.Second)); len(got) != 0 {
		t.Errorf("%d deliveries due to disabled endpoints", len(got))
	}
}

// TestWebhookDeliveryOrder: a failing delivery holds back the later events of its
// transaction to its endpoint (not those of other transactions); once dead it lets them go;
// the log lists newest first; deleting the endpoint removes its deliveries.
func TestWebhookDeliveryOrder(t *testing.T) { forEachBackend(t, testWebhookDeliveryOrder) }

func testWebhookDeliveryOrder(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addWebhooks(t, db, testWebhook("wh_a", "alice", "https://a.example/1"))
	one := insertSigned(t, db, "alice", 0)
	two := insertSigned(t, db, "alice", 1)
	setState(t, db, one, StateSigned, StateBroadcast)
	setState(t, db, one, StateBroadcast, StateFailed)
	setState(t, db, two, StateSigned, StateBroadcast)

	later := time.Now().Add(time.Second)
	due := dueDeliveries(t, db, later)
	if len(due) != 2 || due[0].Event.TxID != one || due[0].Event.State != StateBroadcast || due[1].Event.TxID != two {
		t.Fatalf("due %+v, want one's broadcast then two's", due)
	}
	finish := func(id int64, a WebhookAttempt) {
		t.Helper()
		if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.FinishWebhookAttempt(ctx, id, a) }); err != nil {
			t.Fatal(err)
		}
	}
	// one's broadcast fails: retried in a minute; one's failed event still waits behind it.
	finish(due[0].ID, WebhookAttempt{State: DeliveryPending, NextAttemptAt: later.Add(time.Minute), Status: 500, Error: "HTTP 500", At: later})
	if got := dueDeliveries(t, db, later); len(got) != 1 || got[0].Event.TxID != two {
		t.Fatalf("due after a failure %+v, want two's only", got)
	}
	// Dead: the next event of one goes.
	finish(due[0].ID, WebhookAttempt{State: DeliveryDead, Status: 500, Error: "HTTP 500", At: later})
	got := dueDeliveries(t, db, later)
	if len(got) != 2 || got[0].Event.TxID != one || got[0].Event.State != StateFailed {
		t.Fatalf("due after dead %+v, want one's failed event first", got)
	}
	finish(got[0].ID, WebhookAttempt{State: DeliveryDelivered, Status: 204, At: later})
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.FinishWebhookAttempt(ctx, got[0].ID, WebhookAttempt{State: DeliveryDelivered, At: later})
	}); !errors.Is(err, ErrNotFound) {
		t.Errorf("finishing a delivered delivery: %v, want ErrNotFound", err)
	}

	var log []WebhookDelivery
	var pending int64
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		if log, err = dbtx.WebhookDeliveries(ctx, "wh_a", 10); err != nil {
			return err
		}
		pending, err = dbtx.PendingWebhookDeliveries(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(log) != 3 || log[0].ID < log[1].ID || log[1].ID < log[2].ID {
		t.Fatalf("log %+v, want 3 newest first", log)
	}
	if d := log[2]; d.State != DeliveryDead || d.Attempts != 2 || d.LastStatus != 500 || d.LastError != "HTTP 500" || d.DeliveredAt != nil {
		t.Errorf("dead delivery %+v", d)
	}
	if pending != 1 {
		t.Errorf("pending %d, want 1 (two's broadcast)", pending)
	}
	delivered := 0
	for _, d := range log {
		if d.State == DeliveryDelivered {
			delivered++
			if d.DeliveredAt == nil || d.LastStatus != 204 || d.Attempts != 1 {
				t.Errorf("delivered %+v", d)
			}
		}
	}
	if delivered != 1 {
		t.Errorf("%d delivered, want 1", delivered)
	}

	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.DeleteWebhook(ctx, "wh_a") }); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.DeleteWebhook(ctx, "wh_a") }); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if got := dueDeliveries(t, db, later); len(got) != 0 {
		t.Errorf("%d deliveries due after the delete", len(got))
	}
}

// TestWebhookPrune: delivered and dead deliveries finished before the cutoff are deleted in
// batches of the limit, pending ones never (however old their next attempt), and an event
// only once no delivery refers to it; the deliveries due are the same before and after (the
// order rule holds).
func TestWebhookPrune(t *testing.T) { forEachBackend(t, testWebhookPrune) }

func testWebhookPrune(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addWebhooks(t, db, testWebhook("wh_a", "alice", "https://a.example/1"), testWebhook("wh_b", "alice", "https://a.example/2"))
	one := insertSigned(t, db, "alice", 0)
	two := insertSigned(t, db, "alice", 1)
	setState(t, db, one, StateSigned, StateBroadcast)
	setState(t, db, one, StateBroadcast, StateFailed)
	setState(t, db, two, StateSigned, StateBroadcast)
	setState(t, db, two, StateBroadcast, StateFailed)

	now := time.Now()
	old, cutoff, recent := now, now.Add(time.Hour), now.Add(2*time.Hour)
	delivery := map[string]int64{} // "tx/state/webhook"
	for _, d := range dueDeliveries(t, db, recent) {
		delivery[fmt.Sprintf("%d/%s/%s", d.Event.TxID, d.Event.State, d.WebhookID)] = d.ID
	}
	finish := func(key string, a WebhookAttempt) {
		t.Helper()
		id, ok := delivery[key]
		if !ok {
			t.Fatalf("no due delivery %s in %v", key, delivery)
		}
		if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.FinishWebhookAttempt(ctx, id, a) }); err != nil {
			t.Fatal(err)
		}
		for _, d := range dueDeliveries(t, db, recent) {
			delivery[fmt.Sprintf("%d/%s/%s", d.Event.TxID, d.Event.State, d.WebhookID)] = d.ID
		}
	}
	key := func(id int64, state, webhook string) string { return fmt.Sprintf("%d/%s/%s", id, state, webhook) }
	// one: every delivery to wh_a finished long ago; to wh_b the broadcast dead long ago, the
	// failed event pending with an attempt due long ago.
	finish(key(one, StateBroadcast, "wh_a"), WebhookAttempt{State: DeliveryDelivered, Status: 200, At: old})
	finish(key(one, StateFailed, "wh_a"), WebhookAttempt{State: DeliveryDelivered, Status: 200, At: old})
	finish(key(one, StateBroadcast, "wh_b"), WebhookAttempt{State: DeliveryDead, Status: 500, Error: "HTTP 500", At: old})
	finish(key(one, StateFailed, "wh_b"), WebhookAttempt{State: DeliveryPending, Status: 500, Error: "HTTP 500", NextAttemptAt: old, At: old})
	// two: its broadcast delivered to wh_a after the cutoff; the rest pending.
	finish(key(two, StateBroadcast, "wh_a"), WebhookAttempt{State: DeliveryDelivered, Status: 200, At: recent})

	dueKeys := func() []string {
		var out []string
		for _, d := range dueDeliveries(t, db, recent) {
			out = append(out, fmt.Sprintf("%d:%s", d.ID, key(d.Event.TxID, d.Event.State, d.WebhookID)))
		}
		slices.Sort(out)
		return out
	}
	dueBefore := dueKeys()
	if want := []string{key(one, StateFailed, "wh_b"), key(two, StateBroadcast, "wh_b"), key(two, StateFailed, "wh_a")}; len(dueBefore) != len(want) {
		t.Fatalf("due before pruning %q, want the deliveries %q", dueBefore, want)
	}

	prune := func(events bool, limit int) int64 {
		t.Helper()
		var n int64
		if err := db.Write(ctx, func(dbtx *DBTx) error {
			var err error
			if events {
				n, err = dbtx.PruneWebhookEvents(ctx, cutoff, limit)
			} else {
				n, err = dbtx.PruneWebhookDeliveries(ctx, cutoff, limit)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Events first: none is free of deliveries yet.
	if n := prune(true, 1000); n != 0 {
		t.Errorf("pruned %d events before their deliveries", n)
	}
	for i, want := range []int64{2, 1, 0} { // three finished before the cutoff, batches of 2
		if n := prune(false, 2); n != want {
			t.Errorf("deliveries batch %d: pruned %d, want %d", i, n, want)
		}
	}
	for i, want := range []int64{1, 0} { // one's broadcast: both its deliveries gone
		if n := prune(true, 1); n != want {
			t.Errorf("events batch %d: pruned %d, want %d", i, n, want)
		}
	}

	if got := eventStates(t, db, one); !slices.Equal(got, []string{StateFailed}) {
		t.Errorf("one's events after pruning %q, want its failed event only (pending to wh_b)", got)
	}
	if got := eventStates(t, db, two); !slices.Equal(got, []string{StateBroadcast, StateFailed}) {
		t.Errorf("two's events after pruning %q, want both", got)
	}
	logs := map[string][]string{}
	for _, w := range []string{"wh_a", "wh_b"} {
		var ds []WebhookDelivery
		if err := db.Read(ctx, func(dbtx *DBTx) error { var err error; ds, err = dbtx.WebhookDeliveries(ctx, w, 100); return err }); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			logs[w] = append(logs[w], key(d.Event.TxID, d.Event.State, w)+"="+d.State)
		}
	}
	wantA := []string{key(two, StateFailed, "wh_a") + "=pending", key(two, StateBroadcast, "wh_a") + "=delivered"}
	wantB := []string{key(two, StateFailed, "wh_b") + "=pending", key(two, StateBroadcast, "wh_b") + "=pending", key(one, StateFailed, "wh_b") + "=pending"}
	if !slices.Equal(logs["wh_a"], wantA) || !slices.Equal(logs["wh_b"], wantB) {
		t.Errorf("deliveries left %q, want wh_a %q and wh_b %q", logs, wantA, wantB)
	}
	if after := dueKeys(); !slices.Equal(after, dueBefore) {
		t.Errorf("due after pruning %q, before %q", after, dueBefore)
	}
}

// TestWebhookEventsOverVersions: a version signed or broadcast while the request stays
// broadcast is no event; a stuck request that gets a version is broadcast again, an event;
// the version mined settles the request (cancelled for a cancel) and its events carry the
// original hash and the mined version's.
func TestWebhookEventsOverVersions(t *testing.T) { forEachBackend(t, testWebhookEventsOverVersions) }

func testWebhookEventsOverVersions(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	write := func(f func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	addWebhooks(t, db, testWebhook("wh_a", "alice", "https://a.example/1"))
	addVersion := func(id int64, kind string, hash common.Hash) {
		t.Helper()
		write(func(dbtx *DBTx) error {
			rec, err := dbtx.TxByID(ctx, id)
			if err != nil {
				return err
			}
			v := &TxVersion{Kind: kind, Fields: []byte(`{}`), MaxCost: big.NewInt(5000), Raw: hash.Bytes(), Hash: hash}
			if err := dbtx.AddVersion(ctx, rec, v); err != nil {
				return err
			}
			return dbtx.SetVersionBroadcast(ctx, id, v.Seq)
		})
	}
	mined := func(hash common.Hash, block uint64) {
		t.Helper()
		write(func(dbtx *DBTx) error {
			n, err := dbtx.SetMinedVersion(ctx, 1, hash, block, common.BigToHash(new(big.Int).SetUint64(block)))
			if err == nil && n != 1 {
				err = fmt.Errorf("%d requests mined by %s", n, hash.Hex())
			}
			return err
		})
	}
	eventsOf := func(id int64) []WebhookEvent {
		t.Helper()
		var evs []WebhookEvent
		if err := db.Read(ctx, func(dbtx *DBTx) error { var err error; evs, err = dbtx.WebhookEvents(ctx, id); return err }); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	summary := func(evs []WebhookEvent) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.State+" "+e.Hash+" "+e.MinedHash)
		}
		return out
	}

	// Bumped twice while broadcast, the second bump mined, then confirmed.
	bumped := insertSigned(t, db, "alice", 0)
	orig := common.BigToHash(big.NewInt(1000)).Hex()
	setState(t, db, bumped, StateSigned, StateBroadcast)
	bump1, bump2 := common.HexToHash("0xb1"), common.HexToHash("0xb2")
	addVersion(bumped, VersionBump, bump1)
	addVersion(bumped, VersionSpeedup, bump2)
	if got := summary(eventsOf(bumped)); !slices.Equal(got, []string{"broadcast " + orig + " "}) {
		t.Fatalf("events after two versions while broadcast %q, want the broadcast only", got)
	}
	mined(bump2, 42)
	write(func(dbtx *DBTx) error { _, err := dbtx.Confirm(ctx, 1, 42); return err })
	want := []string{"broadcast " + orig + " ", "mined " + orig + " " + bump2.Hex(), "confirmed " + orig + " " + bump2.Hex()}
	if got := summary(eventsOf(bumped)); !slices.Equal(got, want) {
		t.Errorf("bumped request's events %q, want %q", got, want)
	}

	// Stuck, a bump makes it broadcast again, stuck again, then a cancel is mined.
	stuck := insertSigned(t, db, "alice", 1)
	orig = common.BigToHash(big.NewInt(1001)).Hex()
	setState(t, db, stuck, StateSigned, StateBroadcast)
	setState(t, db, stuck, StateBroadcast, StateStuck)
	addVersion(stuck, VersionBump, common.HexToHash("0xc1"))
	setState(t, db, stuck, StateBroadcast, StateStuck)
	cancel := common.HexToHash("0xcc")
	addVersion(stuck, VersionCancel, cancel)
	mined(cancel, 43)
	want = []string{"broadcast " + orig + " ", "stuck " + orig + " ", "broadcast " + orig + " ", "stuck " + orig + " ",
		"broadcast " + orig + " ", "cancelled " + orig + " " + cancel.Hex()}
	evs := eventsOf(stuck)
	if got := summary(evs); !slices.Equal(got, want) {
		t.Errorf("stuck request's events %q, want %q", got, want)
	}
	if last := evs[len(evs)-1]; last.BlockNumber == nil || *last.BlockNumber != 43 || last.Nonce != 1 {
		t.Errorf("cancelled event %+v", last)
	}
	// Every event has its delivery, due in order.
	if due := dueDeliveries(t, db, time.Now().Add(time.Second)); len(due) != 2 || due[0].Event.State != StateBroadcast || due[1].Event.State != StateBroadcast {
		t.Errorf("due %+v, want each request's first broadcast", due)
	}
}

// TestSyncConfigWebhooks: config endpoints are upserted by principal and URL (the id of the
// first sync kept, the secret replaced), and the config endpoints no longer listed disabled;
// admin endpoints stay; a duplicate URL of a principal is ErrExists.
func TestSyncConfigWebhooks(t *testing.T) { forEachBackend(t, testSyncConfigWebhooks) }

func testSyncConfigWebhooks(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	sync := func(ws ...Webhook) []Webhook {
		t.Helper()
		var out []Webhook
		if err := db.Write(ctx, func(dbtx *DBTx) error { var err error; out, err = dbtx.SyncConfigWebhooks(ctx, ws); return err }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	list := func() map[string]Webhook {
		t.Helper()
		m := map[string]Webhook{}
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			ws, err := dbtx.Webhooks(ctx, "")
			for _, w := range ws {
				m[w.URL] = w
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.InsertWebhook(ctx, testWebhook("wh_admin", "dev", "https://admin.example/"))
	}); err != nil {
		t.Fatal(err)
	}
	err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.InsertWebhook(ctx, testWebhook("wh_other", "dev", "https://admin.example/"))
	})
	if !errors.Is(err, ErrExists) {
		t.Errorf("duplicate URL: %v, want ErrExists", err)
	}
	first := sync(Webhook{ID: "wh_c1", Principal: "dev", URL: "https://c.example/1", Secret: "s1", CreatedAt: time.Now()},
		Webhook{ID: "wh_c2", Principal: "dev", URL: "https://c.example/2", Secret: "s2", CreatedAt: time.Now()})
	if first[0].ID != "wh_c1" || first[1].ID != "wh_c2" {
		t.Fatalf("first sync %+v", first)
	}
	again := sync(Webhook{ID: "wh_new", Principal: "dev", URL: "https://c.example/1", Secret: "s1b", CreatedAt: time.Now()})
	if again[0].ID != "wh_c1" || again[0].Secret != "s1b" {
		t.Fatalf("second sync %+v, want the id kept and the secret replaced", again)
	}
	m := list()
	if w := m["https://c.example/1"]; !w.Enabled || w.Secret != "s1b" || w.Source != WebhookSourceConfig {
		t.Errorf("kept config endpoint %+v", w)
	}
	if w := m["https://c.example/2"]; w.Enabled {
		t.Errorf("unlisted config endpoint %+v is enabled", w)
	}
	if w := m["https://admin.example/"]; !w.Enabled || w.Source != WebhookSourceAdmin {
		t.Errorf("admin endpoint %+v", w)
	}
	sync(Webhook{ID: "wh_c2b", Principal: "dev", URL: "https://c.example/2", Secret: "s2", CreatedAt: time.Now()})
	if w := list()["https://c.example/2"]; !w.Enabled || w.ID != "wh_c2" {
		t.Errorf("listed again %+v, want wh_c2 enabled", w)
	}
}

// BenchmarkWebhookTrigger: the cost of the webhook trigger on a state change (an UPDATE
// moving a row between broadcast and mined; 100 of them per write transaction, so that the
// commit's fsync does not drown the difference), against the same change with the trigger
// dropped: with no endpoint of the principal it is one indexed EXISTS; with one, an event and
// a delivery are written too.
func BenchmarkWebhookTrigger(b *testing.B) {
	for _, be := range backends {
		for _, mode := range []string{"no-trigger", "no-endpoint", "endpoint"} {
			b.Run(string(be)+"/"+mode, func(b *testing.B) {
				ctx := context.Background()
				cfg := Config{Driver: string(be)}
				if be == postgresBackend {
					cfg.DSN = testengine.Postgres(b)
				} else {
					cfg.Path = b.TempDir() + "/web3gate.db"
				}
				cfg.SetDefaults()
				db, err := Open(ctx, cfg, Deps{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				// Other principals' endpoints, as an installation has.
				for i := range 100 {
					if err := db.Write(ctx, func(dbtx *DBTx) error {
						return dbtx.InsertWebhook(ctx, testWebhook(fmt.Sprintf("wh_%d", i), fmt.Sprintf("other%d", i), "https://h.example/"))
					}); err != nil {
						b.Fatal(err)
					}
				}
				switch mode {
				case "no-trigger":
					if err := db.Write(ctx, func(dbtx *DBTx) error {
						_, err := dbtx.ExecContext(ctx, `DROP TRIGGER txs_webhook_event ON txs`)
						return err
					}); be == postgresBackend && err != nil {
						b.Fatal(err)
					}
					if be == sqliteBackend {
						if err := db.Write(ctx, func(dbtx *DBTx) error { _, err := dbtx.ExecContext(ctx, `DROP TRIGGER txs_webhook_event`); return err }); err != nil {
							b.Fatal(err)
						}
					}
				case "endpoint":
					if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertWebhook(ctx, testWebhook("wh_p", "p", "https://h.example/")) }); err != nil {
						b.Fatal(err)
					}
				}
				r := testRecord(1, addrN(3), 0)
				if err := db.Write(ctx, func(dbtx *DBTx) error {
					if err := dbtx.InsertTx(ctx, r); err != nil {
						return err
					}
					if err := dbtx.SetSigned(ctx, r.ID, []byte{1}, common.HexToHash("0x1"), StateSigned); err != nil {
						return err
					}
					return dbtx.SetState(ctx, r.ID, []string{StateSigned}, StateBroadcast, "")
				}); err != nil {
					b.Fatal(err)
				}
				states := [2]string{StateBroadcast, StateMined}
				b.ResetTimer()
				for i := 0; i < b.N; i += 100 {
					if err := db.Write(ctx, func(dbtx *DBTx) error {
						for j := i; j < min(i+100, b.N); j++ {
							if err := dbtx.SetState(ctx, r.ID, []string{states[j%2]}, states[(j+1)%2], ""); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkWebhookPrune: one round of retention's batches, 1000 finished deliveries and then
// their 1000 events (an op), beside 20,000 pending deliveries that stay.
func BenchmarkWebhookPrune(b *testing.B) {
	for _, be := range backends {
		b.Run(string(be), func(b *testing.B) {
			ctx := context.Background()
			cfg := Config{Driver: string(be)}
			if be == postgresBackend {
				cfg.DSN = testengine.Postgres(b)
			} else {
				cfg.Path = b.TempDir() + "/web3gate.db"
			}
			cfg.SetDefaults()
			db, err := Open(ctx, cfg, Deps{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.InsertWebhook(ctx, testWebhook("wh_p", "p", "https://h.example/")) }); err != nil {
				b.Fatal(err)
			}
			old := formatTime(time.Now().Add(-30 * 24 * time.Hour))
			seq := 0
			// add records n events, each with a delivery in state.
			add := func(n int, state string) {
				b.Helper()
				const rows = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) `
				if err := db.Write(ctx, func(dbtx *DBTx) error {
					if _, err := dbtx.ExecContext(ctx, rows+`INSERT INTO webhook_events (seq, tx_id, principal, state, created_at)
						SELECT ? + i, ? + i, 'p', 'mined', ? FROM n`, n, seq, seq, old); err != nil {
						return err
					}
					_, err := dbtx.ExecContext(ctx, rows+`INSERT INTO webhook_deliveries (webhook_id, event_seq, tx_id, state, attempts, next_attempt_at, created_at)
						SELECT 'wh_p', ? + i, ? + i, ?, 1, ?, ? FROM n`, n, seq, seq, state, old, old)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				seq += n
			}
			add(20000, DeliveryPending)
			cutoff := time.Now().Add(-24 * time.Hour)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				add(1000, DeliveryDelivered)
				b.StartTimer()
				for _, prune := range []func(dbtx *DBTx) (int64, error){
					func(dbtx *DBTx) (int64, error) { return dbtx.PruneWebhookDeliveries(ctx, cutoff, 1000) },
					func(dbtx *DBTx) (int64, error) { return dbtx.PruneWebhookEvents(ctx, cutoff, 1000) },
				} {
					var n int64
					if err := db.Write(ctx, func(dbtx *DBTx) error { var err error; n, err = prune(dbtx); return err }); err != nil {
						b.Fatal(err)
					}
					if n != 1000 {
						b.Fatalf("pruned %d rows, want 1000", n)
					}
				}
			}
		})
	}
}

// TestWebhookQueriesUseIndexes: on SQLite the deliverer's poll reads the pending deliveries
// through the partial indexes (not every delivery ever made), and the trigger's lookup is the
// covering index of enabled endpoints. A query whose terms stop matching an index's WHERE
// (a parameter instead of the literal) fails this.
func TestWebhookQueriesUseIndexes(t *testing.T) {
	db := openBackend(t, sqliteBackend)
	plan := func(q string, args ...any) string {
		t.Helper()
		return strings.Join(queryPlan(t, db, q, args...), "\n")
	}
	for _, tc := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"due", qDueDeliveries, []any{"2026-01-01", 10}, []string{"USING INDEX webhook_deliveries_due", "USING COVERING INDEX webhook_deliveries_order"}},
		{"pending", qPendingDeliveries, nil, []string{"webhook_deliveries_order"}},
		{"log", qDeliveryLog, []any{"wh_1", 10}, []string{"USING INDEX webhook_deliveries_webhook_event (webhook_id=?)"}},
		{"prune deliveries", qPruneDeliveries, []any{"2026-01-01", 1000}, []string{"USING INDEX webhook_deliveries_finished (next_attempt_at<?)"}},
		{"prune events", qPruneEvents, []any{"2026-01-01", 1000}, []string{"INDEX webhook_events_created (created_at<?)", "USING COVERING INDEX webhook_deliveries_event (event_seq=?)"}},
		{"trigger lookup", `SELECT 1 FROM webhooks WHERE principal = ? AND enabled = 1`, []any{"p"}, []string{"USING COVERING INDEX webhooks_enabled (principal=?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.query, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(p, w) {
					t.Errorf("plan lacks %q:\n%s", w, p)
				}
			}
			if strings.Contains(p, "SCAN d\n") || strings.HasSuffix(p, "SCAN d") {
				t.Errorf("plan scans every delivery:\n%s", p)
			}
		})
	}
}

// TestWebhookTriggerArmedByFirstEndpoint: on PostgreSQL the outbox trigger is disabled until
// the first endpoint exists (its function would otherwise run at every state change), and the
// write that adds the endpoint enables it: the next state change has its event.
func TestWebhookTriggerArmedByFirstEndpoint(t *testing.T) {
	ctx := context.Background()
	db := openBackend(t, postgresBackend)
	enabled := func() string {
		t.Helper()
		var state string
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			return dbtx.QueryRowContext(ctx, `SELECT tgenabled FROM pg_trigger WHERE tgrelid = 'txs'::regclass AND tgname = 'txs_webhook_event'`).Scan(&state)
		}); err != nil {
			t.Fatal(err)
		}
		return state
	}
	if s := enabled(); s != "D" {
		t.Fatalf("trigger state %q on a store without endpoints, want D (disabled)", s)
	}
	id := insertSigned(t, db, "alice", 0)
	addWebhooks(t, db, testWebhook("wh_a", "alice", "https://a.example/1"))
	if s := enabled(); s != "O" {
		t.Fatalf("trigger state %q after the first endpoint, want O (enabled)", s)
	}
	addWebhooks(t, db, testWebhook("wh_b", "alice", "https://a.example/2")) // already enabled: no change
	setState(t, db, id, StateSigned, StateBroadcast)
	var events []WebhookEvent
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		events, err = dbtx.WebhookEvents(ctx, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].State != StateBroadcast {
		t.Fatalf("events %+v, want the broadcast", events)
	}
}
