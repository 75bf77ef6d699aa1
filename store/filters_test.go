package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// filterID is a valid filter id made of n.
func filterID(n int) string { return fmt.Sprintf("0x%032x", n) }

// createFilter creates a block filter of owner on chain with id filterID(n), expiring at
// expires, with a limit of max per owner.
func createFilter(ctx context.Context, db *DB, chain uint64, n int, owner string, max int, now, expires time.Time) (*Filter, error) {
	f := &Filter{FilterKey: FilterKey{ChainID: chain, ID: filterID(n), Owner: owner}, Kind: FilterBlocks,
		Cursor: FilterCursor{Number: 7, Hash: common.HexToHash("0xAB")}, ExpiresAt: expires}
	err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.CreateFilter(ctx, f, max, now) })
	return f, err
}

func getFilter(ctx context.Context, db *DB, k FilterKey, now time.Time) (*Filter, error) {
	var f *Filter
	err := db.ReadOne(ctx, func(dbtx *DBTx) error {
		var err error
		f, err = dbtx.Filter(ctx, k, now)
		return err
	})
	return f, err
}

func liveFilters(t *testing.T, db *DB, now time.Time) map[uint64]int {
	t.Helper()
	var m map[uint64]int
	if err := db.ReadOne(context.Background(), func(dbtx *DBTx) error {
		var err error
		m, err = dbtx.LiveFilters(context.Background(), now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFilterLifecycle: a filter is created within its owner's limit, found only by its whole
// key before its expiry, moved by compare and swap (which extends the expiry), dropped with a
// reason, deleted, and swept once expired; the live count per chain follows.
func TestFilterLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		db := openBackend(t, be)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		ttl := time.Minute

		// Creation: the criteria of a logs filter round-trip; the limit counts the owner's
		// live filters on every chain.
		logs := &Filter{FilterKey: FilterKey{ChainID: 1337, ID: filterID(1), Owner: "alice"}, Kind: FilterLogs,
			Criteria: `{"address":["0x00000000000000000000000000000000000000aa"]}`,
			Cursor:   FilterCursor{Number: 1 << 40, Hash: common.HexToHash("0x01")}, ExpiresAt: now.Add(ttl)}
		if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.CreateFilter(ctx, logs, 3, now) }); err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := createFilter(ctx, db, 1, 2, "alice", 3, now, now.Add(ttl)); err != nil {
			t.Fatalf("create on another chain: %v", err)
		}
		if _, err := createFilter(ctx, db, 1337, 3, "alice", 3, now, now.Add(ttl)); err != nil {
			t.Fatalf("create the third: %v", err)
		}
		if _, err := createFilter(ctx, db, 1337, 4, "alice", 3, now, now.Add(ttl)); !errors.Is(err, ErrFilterLimit) {
			t.Fatalf("create past the limit = %v, want ErrFilterLimit", err)
		}
		if _, err := createFilter(ctx, db, 1337, 4, "bob", 3, now, now.Add(ttl)); err != nil {
			t.Fatalf("another owner's filter: %v", err)
		}
		if _, err := createFilter(ctx, db, 1337, 3, "carol", 3, now, now.Add(ttl)); !errors.Is(err, ErrExists) {
			t.Fatalf("create with an id in use = %v, want ErrExists", err)
		}
		if got := liveFilters(t, db, now); !maps.Equal(got, map[uint64]int{1: 1, 1337: 3}) {
			t.Fatalf("live filters = %v", got)
		}

		got, err := getFilter(ctx, db, logs.FilterKey, now)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Kind != FilterLogs || got.Criteria != logs.Criteria || got.Cursor != logs.Cursor || got.Seq != 0 ||
			got.Dropped != "" || !got.ExpiresAt.Equal(now.Add(ttl)) || !got.CreatedAt.Equal(now) {
			t.Fatalf("get = %+v, want %+v", got, logs)
		}
		// Another owner, another chain, an unknown id, an id that is not text: not found.
		for _, k := range []FilterKey{
			{ChainID: 1337, ID: filterID(1), Owner: "bob"},
			{ChainID: 1, ID: filterID(1), Owner: "alice"},
			{ChainID: 1337, ID: filterID(99), Owner: "alice"},
			{ChainID: 1337, ID: "0x\xff\x00", Owner: "alice"},
		} {
			if _, err := getFilter(ctx, db, k, now); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get %+v = %v, want ErrNotFound", k, err)
			}
		}

		// Compare and swap: the seq read moves the cursor once; the stale seq does nothing.
		c := FilterCursor{Number: 1<<40 + 5, Hash: common.HexToHash("0x05")}
		advance := func(k FilterKey, seq int64, c FilterCursor, expires, at time.Time) bool {
			t.Helper()
			var ok bool
			if err := db.WriteOne(ctx, func(dbtx *DBTx) error {
				var err error
				ok, err = dbtx.AdvanceFilter(ctx, k, seq, c, expires, at)
				return err
			}); err != nil {
				t.Fatalf("advance: %v", err)
			}
			return ok
		}
		later := now.Add(30 * time.Second)
		if !advance(logs.FilterKey, 0, c, later.Add(ttl), later) {
			t.Fatal("advance from the seq read failed")
		}
		if advance(logs.FilterKey, 0, FilterCursor{Number: 1}, later.Add(ttl), later) {
			t.Fatal("advance from a stale seq succeeded")
		}
		if advance(FilterKey{ChainID: 1337, ID: filterID(1), Owner: "bob"}, 1, c, later.Add(ttl), later) {
			t.Fatal("another owner advanced the filter")
		}
		got, err = getFilter(ctx, db, logs.FilterKey, later)
		if err != nil {
			t.Fatal(err)
		}
		if got.Cursor != c || got.Seq != 1 || !got.ExpiresAt.Equal(later.Add(ttl)) {
			t.Fatalf("after the advance: cursor %v seq %d expires %v; want %v, 1, %v", got.Cursor, got.Seq, got.ExpiresAt, c, later.Add(ttl))
		}

		// Expiry: the filters that were not polled are not found past it and count no more;
		// the polled one lives on.
		past := now.Add(ttl)
		if _, err := getFilter(ctx, db, FilterKey{ChainID: 1337, ID: filterID(3), Owner: "alice"}, past); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired filter = %v, want ErrNotFound", err)
		}
		if advance(FilterKey{ChainID: 1337, ID: filterID(3), Owner: "alice"}, 0, c, past.Add(ttl), past) {
			t.Fatal("an expired filter advanced")
		}
		if got := liveFilters(t, db, past); !maps.Equal(got, map[uint64]int{1337: 1}) {
			t.Fatalf("live filters after the expiry = %v", got)
		}
		// The limit counts live filters only: alice may create again.
		if _, err := createFilter(ctx, db, 1337, 5, "alice", 3, past, past.Add(ttl)); err != nil {
			t.Fatalf("create after the expiry: %v", err)
		}

		// Drop: by compare and swap as well; the row stays, found with its reason, moves no
		// more, is not deleted by an uninstall, and counts toward nothing.
		drop := func(k FilterKey, seq int64) bool {
			t.Helper()
			var ok bool
			if err := db.WriteOne(ctx, func(dbtx *DBTx) error {
				var err error
				ok, err = dbtx.DropFilter(ctx, k, seq, "too many logs", past)
				return err
			}); err != nil {
				t.Fatalf("drop: %v", err)
			}
			return ok
		}
		if drop(logs.FilterKey, 0) {
			t.Fatal("drop from a stale seq succeeded")
		}
		if !drop(logs.FilterKey, 1) {
			t.Fatal("drop failed")
		}
		if drop(logs.FilterKey, 2) {
			t.Fatal("a dropped filter was dropped again")
		}
		got, err = getFilter(ctx, db, logs.FilterKey, past)
		if err != nil || got.Dropped != "too many logs" {
			t.Fatalf("dropped filter = %+v, %v; want its reason", got, err)
		}
		if advance(logs.FilterKey, got.Seq, c, past.Add(ttl), past) {
			t.Fatal("a dropped filter advanced")
		}
		if got := liveFilters(t, db, past); !maps.Equal(got, map[uint64]int{1337: 1}) {
			t.Fatalf("live filters after the drop = %v", got)
		}

		// Delete: once, only the live filter of that key.
		del := func(k FilterKey) bool {
			t.Helper()
			var ok bool
			if err := db.WriteOne(ctx, func(dbtx *DBTx) error {
				var err error
				ok, err = dbtx.DeleteFilter(ctx, k, past)
				return err
			}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			return ok
		}
		five := FilterKey{ChainID: 1337, ID: filterID(5), Owner: "alice"}
		if del(FilterKey{ChainID: 1337, ID: filterID(5), Owner: "bob"}) || del(FilterKey{ChainID: 1, ID: filterID(5), Owner: "alice"}) {
			t.Fatal("deleted through another owner's or chain's key")
		}
		if !del(five) || del(five) {
			t.Fatal("delete: want true once, then false")
		}
		if del(logs.FilterKey) {
			t.Fatal("deleted a dropped filter")
		}

		// Sweep: every row expired by then, dropped or not.
		var swept int64
		sweep := func(at time.Time) int64 {
			t.Helper()
			if err := db.WriteOne(ctx, func(dbtx *DBTx) error {
				var err error
				swept, err = dbtx.SweepFilters(ctx, at)
				return err
			}); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			return swept
		}
		// At past: filters 2, 3 (chain 1 and 1337 of alice) and bob's 4 expired.
		if n := sweep(past); n != 3 {
			t.Fatalf("swept %d at the first expiry, want 3", n)
		}
		if n := sweep(later.Add(ttl)); n != 1 {
			t.Fatalf("swept %d at the dropped filter's expiry, want 1", n)
		}
		var left int
		if err := db.ReadOne(ctx, func(dbtx *DBTx) error {
			return dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM filters`).Scan(&left)
		}); err != nil || left != 0 {
			t.Fatalf("rows left = %d, %v; want 0", left, err)
		}
	})
}

// TestFilterCreateRefuses: what the table cannot hold is refused before any statement.
func TestFilterCreateRefuses(t *testing.T) {
	db := openBackend(t, sqliteBackend)
	ctx := context.Background()
	now := time.Now()
	for _, tc := range []struct {
		name string
		f    Filter
	}{
		{"no id", Filter{FilterKey: FilterKey{Owner: "a"}, Kind: FilterBlocks}},
		{"no owner", Filter{FilterKey: FilterKey{ID: filterID(1)}, Kind: FilterBlocks}},
		{"unknown kind", Filter{FilterKey: FilterKey{ID: filterID(1), Owner: "a"}, Kind: "pending"}},
		{"logs without criteria", Filter{FilterKey: FilterKey{ID: filterID(1), Owner: "a"}, Kind: FilterLogs}},
		{"owner not text", Filter{FilterKey: FilterKey{ID: filterID(1), Owner: "a\x00"}, Kind: FilterBlocks}},
		{"cursor out of range", Filter{FilterKey: FilterKey{ID: filterID(1), Owner: "a"}, Kind: FilterBlocks, Cursor: FilterCursor{Number: 1 << 63}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := db.Write(ctx, func(dbtx *DBTx) error { return dbtx.CreateFilter(ctx, &tc.f, 10, now) }); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestFilterConcurrency (PostgreSQL, where writers run at once): of many polls that read the
// same seq, exactly one moves the cursor; many creations of one owner at once never pass the
// limit.
func TestFilterConcurrency(t *testing.T) {
	db := openBackend(t, postgresBackend)
	ctx := context.Background()
	now := time.Now()
	f, err := createFilter(ctx, db, 1, 0, "alice", 100, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var won atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			err := db.WriteOne(ctx, func(dbtx *DBTx) error {
				ok, err := dbtx.AdvanceFilter(ctx, f.FilterKey, 0, FilterCursor{Number: uint64(100 + i)}, now.Add(time.Hour), now)
				if ok {
					won.Add(1)
				}
				return err
			})
			if err != nil {
				errs <- err
			}
		})
	}
	for i := range n {
		wg.Go(func() {
			if _, err := createFilter(ctx, db, 1, 1+i, "bob", 5, now, now.Add(time.Hour)); err != nil && !errors.Is(err, ErrFilterLimit) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if won.Load() != 1 {
		t.Fatalf("%d concurrent advances from one seq succeeded, want 1", won.Load())
	}
	var bobs int
	if err := db.ReadOne(ctx, func(dbtx *DBTx) error {
		return dbtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM filters WHERE owner = 'bob'`).Scan(&bobs)
	}); err != nil {
		t.Fatal(err)
	}
	if bobs != 5 {
		t.Fatalf("bob has %d filters after %d concurrent creations with a limit of 5", bobs, n)
	}
}
