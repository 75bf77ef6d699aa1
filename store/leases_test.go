package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeaseAcquireRenewRelease(t *testing.T) {
	db := openTest(t, testConfig(t), options{})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	acquire := func(name, holder string, at time.Time, ttl time.Duration) (*Lease, bool) {
		t.Helper()
		var (
			l  *Lease
			ok bool
		)
		err := db.Write(ctx, func(dbtx *DBTx) error {
			var err error
			l, ok, err = dbtx.AcquireLease(ctx, name, holder, at, at.Add(ttl))
			return err
		})
		if err != nil {
			t.Fatalf("acquire %s by %s: %v", name, holder, err)
		}
		return l, ok
	}
	write := func(fn func(dbtx *DBTx) error) error { return db.Write(ctx, fn) }

	l, ok := acquire("confirmer/1", "a/1", now, 10*time.Second)
	if !ok || l.Epoch != 1 || l.Holder != "a/1" || !l.ExpiresAt.Equal(now.Add(10*time.Second)) {
		t.Fatalf("first acquisition = %+v, %v; want a/1 at epoch 1 until now+10s", l, ok)
	}
	// Another holder is refused while the lease stands, and told who holds it.
	if cur, ok := acquire("confirmer/1", "b/1", now.Add(9*time.Second), 10*time.Second); ok || cur.Holder != "a/1" || cur.Epoch != 1 {
		t.Fatalf("acquisition by b before the expiry = %+v, %v; want refused, held by a/1 at epoch 1", cur, ok)
	}
	// Another name is independent.
	if _, ok := acquire("owners-indexer/1", "b/1", now, 10*time.Second); !ok {
		t.Fatal("another lease name was refused")
	}
	// The holder renews; a renewal at another epoch or by another holder is refused.
	if err := write(func(dbtx *DBTx) error {
		return dbtx.RenewLease(ctx, "confirmer/1", "a/1", 1, now.Add(5*time.Second), now.Add(15*time.Second))
	}); err != nil {
		t.Fatalf("renew: %v", err)
	}
	for _, c := range []struct {
		holder string
		epoch  int64
	}{{"a/1", 2}, {"b/1", 1}} {
		err := write(func(dbtx *DBTx) error {
			return dbtx.RenewLease(ctx, "confirmer/1", c.holder, c.epoch, now, now.Add(time.Hour))
		})
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("renew by %s at epoch %d = %v, want ErrNotFound", c.holder, c.epoch, err)
		}
	}
	if cur, ok := acquire("confirmer/1", "b/1", now.Add(14*time.Second), 10*time.Second); ok || cur.Epoch != 1 {
		t.Fatalf("acquisition by b before the renewed expiry = %+v, %v; want refused", cur, ok)
	}
	// Expired: b takes it over, at the next epoch; a's renewal then fails.
	l, ok = acquire("confirmer/1", "b/1", now.Add(15*time.Second), 10*time.Second)
	if !ok || l.Epoch != 2 || l.Holder != "b/1" {
		t.Fatalf("takeover after the expiry = %+v, %v; want b/1 at epoch 2", l, ok)
	}
	if err := write(func(dbtx *DBTx) error { return dbtx.RenewLease(ctx, "confirmer/1", "a/1", 1, now, now.Add(time.Hour)) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("renewal by the former holder = %v, want ErrNotFound", err)
	}
	// The holder takes its own lease again (a new epoch) before the expiry.
	if l, ok = acquire("confirmer/1", "b/1", now.Add(16*time.Second), 10*time.Second); !ok || l.Epoch != 3 {
		t.Fatalf("re-acquisition by the holder = %+v, %v; want epoch 3", l, ok)
	}
	// A release lets the next one in at once.
	if err := write(func(dbtx *DBTx) error {
		return dbtx.ReleaseLease(ctx, "confirmer/1", "b/1", 3, now.Add(17*time.Second))
	}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := write(func(dbtx *DBTx) error {
		return dbtx.ReleaseLease(ctx, "confirmer/1", "b/1", 3, now.Add(17*time.Second))
	}); err != nil {
		t.Fatalf("a second release by the same holder: %v", err)
	}
	if l, ok = acquire("confirmer/1", "a/2", now.Add(17*time.Second), 10*time.Second); !ok || l.Epoch != 4 || l.Holder != "a/2" {
		t.Fatalf("acquisition after the release = %+v, %v; want a/2 at epoch 4", l, ok)
	}
	if err := write(func(dbtx *DBTx) error { return dbtx.ReleaseLease(ctx, "confirmer/1", "b/1", 3, now) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("release by the former holder = %v, want ErrNotFound", err)
	}

	var all []*Lease
	if err := db.Read(ctx, func(dbtx *DBTx) error {
		var err error
		all, err = dbtx.Leases(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "confirmer/1" || all[0].Holder != "a/2" || all[0].Epoch != 4 ||
		all[1].Name != "owners-indexer/1" || all[1].Holder != "b/1" {
		t.Fatalf("leases = %+v %+v", all[0], all[1])
	}
	if err := db.Read(ctx, func(dbtx *DBTx) error { _, err := dbtx.Lease(ctx, "nope"); return err }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing lease = %v, want ErrNotFound", err)
	}
	if err := write(func(dbtx *DBTx) error { _, _, err := dbtx.AcquireLease(ctx, "", "a", now, now); return err }); err == nil {
		t.Fatal("an empty lease name was accepted")
	}
}
