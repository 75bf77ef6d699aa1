package store

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// TestUsage: AddUsage creates a row and adds to it, returning the total; Usage reads it (0
// for a row never written, and for a client id that cannot be stored); rows are per client,
// period kind and start; PruneUsage deletes the periods that started before its bound; the
// sum saturates at 2^63-1; bad keys are refused.
func TestUsage(t *testing.T) { forEachBackend(t, testUsage) }

func testUsage(t *testing.T, be backend) {
	db := openBackend(t, be)
	ctx := context.Background()
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	month := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := day.Add(5 * time.Hour)
	add := func(k UsageKey, n uint64) uint64 {
		t.Helper()
		var total uint64
		if err := db.WriteOne(ctx, func(dbtx *DBTx) (err error) {
			total, err = dbtx.AddUsage(ctx, k, n, now)
			return err
		}); err != nil {
			t.Fatalf("AddUsage(%v, %d): %v", k, n, err)
		}
		return total
	}
	usage := func(k UsageKey) uint64 {
		t.Helper()
		var n uint64
		if err := db.ReadOne(ctx, func(dbtx *DBTx) (err error) {
			n, err = dbtx.Usage(ctx, k)
			return err
		}); err != nil {
			t.Fatalf("Usage(%v): %v", k, err)
		}
		return n
	}
	aDay, aMonth, bDay := UsageKey{"a", UsageDay, day}, UsageKey{"a", UsageMonth, month}, UsageKey{"b", UsageDay, day}
	if n := usage(aDay); n != 0 {
		t.Fatalf("usage before any charge = %d", n)
	}
	for _, step := range []struct {
		k          UsageKey
		add, total uint64
	}{{aDay, 10, 10}, {aDay, 5, 15}, {aMonth, 7, 7}, {bDay, 0, 0}, {aDay, 0, 15}, {bDay, 3, 3}} {
		if got := add(step.k, step.add); got != step.total {
			t.Fatalf("AddUsage(%v, %d) = %d, want %d", step.k, step.add, got, step.total)
		}
	}
	for k, want := range map[UsageKey]uint64{aDay: 15, aMonth: 7, bDay: 3, {"a", UsageDay, day.AddDate(0, 0, -1)}: 0, {"c", UsageDay, day}: 0, {"a\x00", UsageDay, day}: 0} {
		if got := usage(k); got != want {
			t.Errorf("Usage(%v) = %d, want %d", k, got, want)
		}
	}

	// Saturation at the column's largest value, instead of an overflow that fails every flush.
	big := UsageKey{"big", UsageMonth, month}
	add(big, math.MaxUint64)
	if got := add(big, 1<<62); got != math.MaxInt64 {
		t.Fatalf("saturated total = %d, want %d", got, int64(math.MaxInt64))
	}

	// Refused keys.
	for _, k := range []UsageKey{{"", UsageDay, day}, {"a", "week", day}, {"a\xff", UsageDay, day}} {
		err := db.WriteOne(ctx, func(dbtx *DBTx) error { _, err := dbtx.AddUsage(ctx, k, 1, now); return err })
		if err == nil {
			t.Errorf("AddUsage(%q) accepted", k)
		}
	}

	// Pruning: the periods that started before the bound go, the others stay.
	old := UsageKey{"a", UsageMonth, month.AddDate(0, -14, 0)}
	add(old, 99)
	var pruned int64
	if err := db.Write(ctx, func(dbtx *DBTx) (err error) {
		pruned, err = dbtx.PruneUsage(ctx, month.AddDate(0, -13, 0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if pruned != 1 || usage(old) != 0 || usage(aMonth) != 7 || usage(aDay) != 15 {
		t.Fatalf("pruned %d; old %d, month %d, day %d", pruned, usage(old), usage(aMonth), usage(aDay))
	}
}

// TestUsageConcurrentAdds: writers adding to one row at once, through two DBs on one
// PostgreSQL database (two replicas), lose nothing, and the totals each saw are the distinct
// running sums.
func TestUsageConcurrentAdds(t *testing.T) {
	cfg := backendConfig(t, postgresBackend)
	cfg.MaxConns = 4
	dbs := []*DB{openTest(t, cfg, options{}), openTest(t, cfg, options{})}
	ctx := context.Background()
	k := UsageKey{"shared", UsageDay, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	const writers, adds = 8, 25
	var (
		mu   sync.Mutex
		seen = map[uint64]bool{}
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				var total uint64
				err := dbs[w%2].WriteOne(ctx, func(dbtx *DBTx) (err error) {
					total, err = dbtx.AddUsage(ctx, k, 1, time.Now())
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen[total] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != writers*adds {
		t.Fatalf("%d distinct totals seen, want %d", len(seen), writers*adds)
	}
	var n uint64
	if err := dbs[0].ReadOne(ctx, func(dbtx *DBTx) (err error) { n, err = dbtx.Usage(ctx, k); return err }); err != nil {
		t.Fatal(err)
	}
	if n != writers*adds {
		t.Fatalf("total %d, want %d", n, writers*adds)
	}
}
