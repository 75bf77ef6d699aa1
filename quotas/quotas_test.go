package quotas

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// The tests run on both backends, as the store's do: SQLite in a file of a temporary
// directory, PostgreSQL in a database of its own (internal/testengine).
var backends = []string{store.DriverSQLite, store.DriverPostgres}

func forEachBackend(t *testing.T, test func(t *testing.T, driver string)) {
	t.Helper()
	for _, d := range backends {
		t.Run(d, func(t *testing.T) { test(t, d) })
	}
}

func storeConfig(t testing.TB, driver string) store.Config {
	t.Helper()
	cfg := store.Config{Driver: driver, Path: filepath.Join(t.TempDir(), "web3gate.db"), MaxConns: 4}
	if driver == store.DriverPostgres {
		cfg.DSN = testengine.Postgres(t)
	}
	cfg.SetDefaults()
	return cfg
}

func openStore(t testing.TB, cfg store.Config) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type testBook struct {
	*Book
	reg *prometheus.Registry
}

func newBook(t *testing.T, db *store.DB, cfg Config, now func() time.Time, log *zap.Logger) testBook {
	t.Helper()
	cfg.Enabled = true
	reg := prometheus.NewRegistry()
	b, err := New(cfg, Deps{DB: db, Logger: log, Registry: reg, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return testBook{b, reg}
}

// stored is the store's total of one row.
func stored(t *testing.T, db *store.DB, client, period string, start time.Time) uint64 {
	t.Helper()
	var n uint64
	ctx := context.Background()
	if err := db.Read(ctx, func(tx *store.DBTx) (err error) {
		n, err = tx.Usage(ctx, store.UsageKey{ClientID: client, Period: period, Start: start})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func charge(t *testing.T, b *Book, client string, units uint64) {
	t.Helper()
	if err := b.Charge(client, units); err != nil {
		t.Fatalf("Charge(%q, %d): %v", client, units, err)
	}
}

func flush(t *testing.T, b *Book) {
	t.Helper()
	if err := b.flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

var (
	nov27    = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	nov1     = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dec1     = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	lateNov  = time.Date(2026, 11, 27, 21, 30, 0, 0, time.UTC)
	lateNov2 = time.Date(2026, 11, 27, 23, 59, 59, 0, time.UTC)
)

// TestChargeRecordsUsage: charges of configured and unconfigured client ids are added to the
// store's day and month rows at a flush, batched (one row per key), the metric counts them
// by client (unconfigured ones as "other"), and a disabled Book records nothing.
func TestChargeRecordsUsage(t *testing.T) { forEachBackend(t, testChargeRecordsUsage) }

func testChargeRecordsUsage(t *testing.T, driver string) {
	db := openStore(t, storeConfig(t, driver))
	clk := &clock{t: lateNov}
	b := newBook(t, db, Config{Clients: []ClientQuota{{ClientID: "abc", Daily: 1000}}}, clk.Now, nil)
	for range 10 {
		charge(t, b.Book, "abc", 7)
		charge(t, b.Book, "anyone", 3)
	}
	charge(t, b.Book, "anyone", 0)
	if n := stored(t, db, "abc", store.UsageDay, nov27); n != 0 {
		t.Fatalf("stored before the flush: %d", n)
	}
	flush(t, b.Book)
	for _, c := range []struct {
		client, period string
		start          time.Time
		want           uint64
	}{{"abc", store.UsageDay, nov27, 70}, {"abc", store.UsageMonth, nov1, 70}, {"anyone", store.UsageDay, nov27, 30}, {"anyone", store.UsageMonth, nov1, 30}} {
		if got := stored(t, db, c.client, c.period, c.start); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.client, c.period, got, c.want)
		}
	}
	charge(t, b.Book, "abc", 5)
	flush(t, b.Book)
	flush(t, b.Book) // nothing pending: nothing added
	if got := stored(t, db, "abc", store.UsageDay, nov27); got != 75 {
		t.Fatalf("after a second flush: %d, want 75", got)
	}
	for label, want := range map[string]float64{"abc": 75, "other": 30} {
		if got := testutil.ToFloat64(unitsCounter(t, b.reg, label)); got != want {
			t.Errorf("web3gate_quota_units_total{client=%q} = %v, want %v", label, got, want)
		}
	}

	off, err := New(Config{Clients: []ClientQuota{{ClientID: "abc", Daily: 1}}}, Deps{DB: db, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		charge(t, off, "abc", 5)
	}
	off.Start()
	if err := off.Close(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, db, "abc", store.UsageDay, nov27); got != 75 {
		t.Fatalf("a disabled Book recorded usage: %d, want 75", got)
	}
}

func unitsCounter(t *testing.T, reg *prometheus.Registry, client string) prometheus.Collector {
	t.Helper()
	return &gathered{reg: reg, name: "web3gate_quota_units_total", labels: map[string]string{"client": client}}
}

// gathered is one series of reg, read through Gather (what /metrics serves).
type gathered struct {
	reg    *prometheus.Registry
	name   string
	labels map[string]string
}

func (g *gathered) Describe(chan<- *prometheus.Desc) {}

func (g *gathered) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := g.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != g.name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := g.labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(g.name, "", nil, nil), prometheus.UntypedValue, v)
			return
		}
	}
}

func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return testutil.ToFloat64(&gathered{reg: reg, name: name, labels: labels})
}

// TestDailyQuotaSpent: a client reaching its daily quota is refused with the distinct message
// naming the quota and the reset at the next UTC midnight, RetryAfter the time until then,
// errors.Is ErrExceeded; the refusal charges nothing, is counted per period, and a call of 0
// units still passes; another client is not affected.
func TestDailyQuotaSpent(t *testing.T) { forEachBackend(t, testDailyQuotaSpent) }

func testDailyQuotaSpent(t *testing.T, driver string) {
	db := openStore(t, storeConfig(t, driver))
	clk := &clock{t: lateNov}
	b := newBook(t, db, Config{Clients: []ClientQuota{{ClientID: "abc", Daily: 1_000_000}, {ClientID: "other-client", Daily: 10}}}, clk.Now, nil)
	charge(t, b.Book, "abc", 600_000)
	flush(t, b.Book)
	charge(t, b.Book, "abc", 399_999) // 999,999: one unit left
	charge(t, b.Book, "abc", 5)       // reaches the quota (and goes past it by its own cost)
	clk.Set(lateNov2)
	err := b.Charge("abc", 1)
	var ee *ExceededError
	if !errors.As(err, &ee) || !errors.Is(err, ErrExceeded) {
		t.Fatalf("Charge past the quota = %v, want an *ExceededError", err)
	}
	if want := "quota exceeded: daily quota of 1000000 units spent; resets at 2026-11-28T00:00:00Z"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() != time.Second {
		t.Fatalf("RetryAfter = %v, want 1s (23:59:59 to midnight)", ra)
	}
	if ee.Period != store.UsageDay || ee.Quota != 1_000_000 || !ee.ResetsAt.Equal(nov27.AddDate(0, 0, 1)) {
		t.Fatalf("error %+v", ee)
	}
	charge(t, b.Book, "abc", 0)
	charge(t, b.Book, "someone", 50)
	flush(t, b.Book)
	if got := stored(t, db, "abc", store.UsageDay, nov27); got != 1_000_004 {
		t.Fatalf("stored %d, want 1000004 (the refused call is not charged)", got)
	}
	if got := metric(t, b.reg, "web3gate_quota_exceeded_total", map[string]string{"period": "day"}); got != 1 {
		t.Fatalf("exceeded{day} = %v", got)
	}
	if got := metric(t, b.reg, "web3gate_quota_exceeded_total", map[string]string{"period": "month"}); got != 0 {
		t.Fatalf("exceeded{month} = %v", got)
	}
}

// TestQuotaResetsAtPeriodChange: at UTC midnight the daily quota starts over on a new row
// (the old day's row stays), at the first of the month the monthly one; charges made just
// before a rollover and flushed after it go to the period they were made in.
func TestQuotaResetsAtPeriodChange(t *testing.T) { forEachBackend(t, testQuotaResetsAtPeriodChange) }

func testQuotaResetsAtPeriodChange(t *testing.T, driver string) {
	db := openStore(t, storeConfig(t, driver))
	nov29 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	clk := &clock{t: nov29.Add(-time.Hour)} // Nov 28, 23:00
	b := newBook(t, db, Config{Clients: []ClientQuota{{ClientID: "abc", Daily: 10, Monthly: 25}}}, clk.Now, nil)
	refused := func(period string) {
		t.Helper()
		var ee *ExceededError
		if err := b.Charge("abc", 1); !errors.As(err, &ee) || ee.Period != period {
			t.Fatalf("Charge = %v, want a refusal of the %s quota", err, period)
		}
	}
	charge(t, b.Book, "abc", 10)
	refused(store.UsageDay)
	// Midnight: a new day, charged before the previous one was flushed.
	clk.Set(nov29)
	charge(t, b.Book, "abc", 10)
	refused(store.UsageDay)
	flush(t, b.Book)
	if a, c := stored(t, db, "abc", store.UsageDay, nov29.AddDate(0, 0, -1)), stored(t, db, "abc", store.UsageDay, nov29); a != 10 || c != 10 {
		t.Fatalf("Nov 28: %d, Nov 29: %d, want 10 each", a, c)
	}
	if m := stored(t, db, "abc", store.UsageMonth, nov1); m != 20 {
		t.Fatalf("November: %d, want 20", m)
	}
	// Nov 30, 23:59: the daily quota allows 5, then the monthly one (20 + 5 = 25) is spent.
	clk.Set(nov29.Add(48*time.Hour - time.Minute))
	charge(t, b.Book, "abc", 5)
	err := b.Charge("abc", 1)
	var ee *ExceededError
	if !errors.As(err, &ee) || ee.Period != store.UsageMonth ||
		err.Error() != "quota exceeded: monthly quota of 25 units spent; resets at 2026-12-01T00:00:00Z" || ee.RetryAfter() != time.Minute {
		t.Fatalf("Charge = %v, want the monthly refusal with RetryAfter 1m", err)
	}
	// December: both start over.
	clk.Set(dec1)
	charge(t, b.Book, "abc", 10)
	flush(t, b.Book)
	if m, d := stored(t, db, "abc", store.UsageMonth, nov1), stored(t, db, "abc", store.UsageMonth, dec1); m != 25 || d != 10 {
		t.Fatalf("November %d, December %d, want 25 and 10", m, d)
	}
}

// TestTotalReadFromStore: a new Book (a restart, or another replica) learns a client's
// total from the store in the background: until then its charges are allowed and counted,
// after that the quota spent elsewhere is enforced; the flusher started by Start does it.
func TestTotalReadFromStore(t *testing.T) { forEachBackend(t, testTotalReadFromStore) }

func testTotalReadFromStore(t *testing.T, driver string) {
	db := openStore(t, storeConfig(t, driver))
	clk := &clock{t: lateNov}
	cfg := Config{FlushInterval: 20 * time.Millisecond, Clients: []ClientQuota{{ClientID: "abc", Daily: 100}}}
	first := newBook(t, db, cfg, clk.Now, nil)
	charge(t, first.Book, "abc", 100)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := newBook(t, db, cfg, clk.Now, nil)
	charge(t, second.Book, "abc", 1) // not known yet: allowed
	if err := second.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := second.Charge("abc", 1); !errors.Is(err, ErrExceeded) {
		t.Fatalf("after the read: %v, want ErrExceeded", err)
	}

	third := newBook(t, db, cfg, clk.Now, nil)
	third.Start()
	charge(t, third.Book, "abc", 1) // wakes the flusher, which reads the total
	deadline := time.Now().Add(30 * time.Second)
	for third.Charge("abc", 1) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the started Book never learned the stored total")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	// Every allowed charge is in the store: 100 + 1 (second) + the third's allowed ones.
	got := stored(t, db, "abc", store.UsageDay, nov27)
	if want := 101 + uint64(testutil.ToFloat64(unitsCounter(t, third.reg, "abc"))); got != want {
		t.Fatalf("stored %d, want %d", got, want)
	}
}

// TestTwoReplicasSum: two Books on one PostgreSQL database, charging one client at once from
// several goroutines with their flushers running, add up exactly in the store; after their
// flushes each knows the other's usage and refuses the client whose quota the two spent
// together.
func TestTwoReplicasSum(t *testing.T) {
	cfg := storeConfig(t, store.DriverPostgres)
	dbs := []*store.DB{openStore(t, cfg), openStore(t, cfg)}
	clk := &clock{t: lateNov}
	qc := Config{FlushInterval: 10 * time.Millisecond, Clients: []ClientQuota{{ClientID: "shared", Daily: 1_000_000_000}, {ClientID: "small", Daily: 100}}}
	books := []testBook{newBook(t, dbs[0], qc, clk.Now, nil), newBook(t, dbs[1], qc, clk.Now, nil)}
	for _, b := range books {
		b.Start()
	}
	const goroutines, charges = 4, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := books[g%2]
			for i := range charges {
				if err := b.Charge("shared", uint64(1+i%3)); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					time.Sleep(time.Millisecond) // let the flushers run between charges
				}
			}
		}()
	}
	wg.Wait()
	for _, b := range books {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	perGoroutine := uint64(0)
	for i := range charges {
		perGoroutine += uint64(1 + i%3)
	}
	if got, want := stored(t, dbs[0], "shared", store.UsageDay, nov27), goroutines*perGoroutine; got != want {
		t.Fatalf("stored %d, want %d", got, want)
	}
	if got, want := stored(t, dbs[1], "shared", store.UsageMonth, nov1), goroutines*perGoroutine; got != want {
		t.Fatalf("stored month %d, want %d", got, want)
	}

	// A quota spent by the two together: each learns the other's part at its flush.
	r := []testBook{newBook(t, dbs[0], qc, clk.Now, nil), newBook(t, dbs[1], qc, clk.Now, nil)}
	charge(t, r[0].Book, "small", 60)
	charge(t, r[1].Book, "small", 40)
	flush(t, r[0].Book) // learns 60
	flush(t, r[1].Book) // learns 100
	if err := r[1].Charge("small", 1); !errors.Is(err, ErrExceeded) {
		t.Fatalf("the second replica, after its flush: %v, want ErrExceeded", err)
	}
	// r[0] knows 60 until its next flush returns the sum: the overshoot of one interval.
	charge(t, r[0].Book, "small", 1)
	flush(t, r[0].Book)
	if err := r[0].Charge("small", 1); !errors.Is(err, ErrExceeded) {
		t.Fatalf("the first replica, after its next flush: %v, want ErrExceeded", err)
	}
}

// TestStoreDown: with the PostgreSQL server stopped, charges go on from memory, each failed
// flush is counted and the outage logged (not once per charge); after the server is back,
// the next flush adds every charge made meanwhile, exactly once.
func TestStoreDown(t *testing.T) {
	pg := testengine.PrivatePostgres(t)
	cfg := store.Config{Driver: store.DriverPostgres, DSN: pg.DSN(), MaxConns: 2, TransactionTimeout: 2 * time.Second}
	cfg.SetDefaults()
	db := openStore(t, cfg)
	clk := &clock{t: lateNov}
	core, logs := observer.New(zap.InfoLevel)
	b := newBook(t, db, Config{FlushInterval: time.Hour, Clients: []ClientQuota{{ClientID: "abc", Daily: 1_000_000}}}, clk.Now, zap.New(core))
	charge(t, b.Book, "abc", 10)
	flush(t, b.Book)

	pg.Stop("fast")
	for range 100 {
		charge(t, b.Book, "abc", 2)
		charge(t, b.Book, "new-client", 1)
	}
	for range 3 {
		if err := b.flush(context.Background()); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("flush with the store down = %v, want ErrUnavailable", err)
		}
	}
	if err := b.load(context.Background()); err == nil {
		t.Fatal("read with the store down succeeded")
	}
	if got := metric(t, b.reg, "web3gate_quota_flush_errors_total", nil); got != 4 {
		t.Fatalf("flush errors = %v, want 4", got)
	}
	if got := metric(t, b.reg, "web3gate_quota_unflushed_units", nil); got != 2*(200+100) {
		t.Fatalf("unflushed units = %v, want 600 (day and month rows of both clients)", got)
	}
	if n := logs.FilterMessageSnippet("the store failed").Len(); n != 1 {
		t.Fatalf("%d failure lines within one flush interval, want 1", n)
	}
	// The admin route cannot read the store: 503, in the REST error object.
	srv := httptest.NewServer(b.AdminHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + AdminPath + "?clientId=abc")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"message":"store unavailable: the usage cannot be read now"`) {
		t.Fatalf("usage with the store down: %d %s", resp.StatusCode, body)
	}

	pg.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := b.flush(context.Background())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flush after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a, n := stored(t, db, "abc", store.UsageDay, nov27), stored(t, db, "new-client", store.UsageMonth, nov1); a != 210 || n != 100 {
		t.Fatalf("after recovery: abc %d (want 210), new-client %d (want 100)", a, n)
	}
	if logs.FilterMessage("quota usage reaches the store again").Len() != 1 {
		t.Fatal("the recovery was not logged")
	}
	flush(t, b.Book)
	if a := stored(t, db, "abc", store.UsageDay, nov27); a != 210 {
		t.Fatalf("a second flush added again: %d", a)
	}
}

// TestMaxClients: past quotas.maxClients client ids in memory, the charges of a further
// unconfigured client id are not recorded (and counted); a configured one always is; client
// ids idle long enough are dropped from memory once flushed, which frees their places.
func TestMaxClients(t *testing.T) {
	db := openStore(t, storeConfig(t, store.DriverSQLite))
	clk := &clock{t: lateNov}
	b := newBook(t, db, Config{MaxClients: 1, Clients: []ClientQuota{{ClientID: "abc", Daily: 100}}}, clk.Now, nil)
	charge(t, b.Book, "first", 5)
	charge(t, b.Book, "second", 7)
	charge(t, b.Book, "abc", 3)
	flush(t, b.Book)
	if f, s, a := stored(t, db, "first", store.UsageDay, nov27), stored(t, db, "second", store.UsageDay, nov27), stored(t, db, "abc", store.UsageDay, nov27); f != 5 || s != 0 || a != 3 {
		t.Fatalf("first %d, second %d, abc %d; want 5, 0, 3", f, s, a)
	}
	if got := metric(t, b.reg, "web3gate_quota_unrecorded_units_total", nil); got != 7 {
		t.Fatalf("unrecorded = %v, want 7", got)
	}
	clk.Set(lateNov.Add(idleAfter(DefaultFlushInterval) + time.Second))
	flush(t, b.Book)
	charge(t, b.Book, "second", 7)
	flush(t, b.Book)
	if s := stored(t, db, "second", store.UsageDay, nov27); s != 7 {
		t.Fatalf("second after the idle ones left: %d, want 7", s)
	}
}

// TestUnstorableClientIDs: the charges of a client id the store cannot hold (empty, too long,
// NUL, not UTF-8) are not recorded, and do not fail the flush of the others.
func TestUnstorableClientIDs(t *testing.T) {
	db := openStore(t, storeConfig(t, store.DriverSQLite))
	b := newBook(t, db, Config{}, func() time.Time { return lateNov }, nil)
	for _, id := range []string{"", strings.Repeat("x", 257), "a\x00b", "\xff"} {
		charge(t, b.Book, id, 4)
	}
	charge(t, b.Book, "fine", 3)
	flush(t, b.Book)
	if got := stored(t, db, "fine", store.UsageDay, nov27); got != 3 {
		t.Fatalf("fine: %d, want 3", got)
	}
	if got := metric(t, b.reg, "web3gate_quota_unrecorded_units_total", nil); got != 16 {
		t.Fatalf("unrecorded = %v, want 16", got)
	}
}

// TestPrune: the flusher deletes rows of periods that started more than 13 months before
// the current month, and keeps the others.
func TestPrune(t *testing.T) {
	db := openStore(t, storeConfig(t, store.DriverSQLite))
	ctx := context.Background()
	old, kept := nov1.AddDate(0, -14, 0), nov1.AddDate(0, -13, 0)
	if err := db.Write(ctx, func(tx *store.DBTx) error {
		for _, s := range []time.Time{old, kept} {
			if _, err := tx.AddUsage(ctx, store.UsageKey{ClientID: "abc", Period: store.UsageMonth, Start: s}, 5, s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := newBook(t, db, Config{}, func() time.Time { return lateNov }, nil)
	b.prune(ctx)
	if o, k := stored(t, db, "abc", store.UsageMonth, old), stored(t, db, "abc", store.UsageMonth, kept); o != 0 || k != 5 {
		t.Fatalf("old %d (want pruned), kept %d (want 5)", o, k)
	}
}

// TestConfigValidate: each bad value is refused with its key path.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"flush too short", Config{FlushInterval: time.Millisecond}, "flushInterval: must be between"},
		{"flush too long", Config{FlushInterval: 2 * time.Hour}, "flushInterval: must be between"},
		{"max clients", Config{MaxClients: -1}, "maxClients: must be between"},
		{"empty id", Config{Clients: []ClientQuota{{Daily: 1}}}, "clients[0].clientId: must not be empty"},
		{"NUL in id", Config{Clients: []ClientQuota{{ClientID: "a\x00", Daily: 1}}}, "clients[0].clientId: must be valid UTF-8"},
		{"long id", Config{Clients: []ClientQuota{{ClientID: strings.Repeat("a", 257), Daily: 1}}}, "clients[0].clientId: must be at most 256"},
		{"duplicate", Config{Clients: []ClientQuota{{ClientID: "a", Daily: 1}, {ClientID: "a", Monthly: 1}}}, `clients[1].clientId: "a" is also clients[0]`},
		{"no quota", Config{Clients: []ClientQuota{{ClientID: "a"}}}, "clients[0]: daily and monthly are both 0"},
		{"too large", Config{Clients: []ClientQuota{{ClientID: "a", Monthly: 1 << 63}}}, "clients[0]: a quota must be at most"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.SetDefaults()
			if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want %q", err, c.want)
			}
		})
	}
	ok := Config{Enabled: true, Clients: []ClientQuota{{ClientID: "a", Daily: 1}, {ClientID: "b", Monthly: 5}}}
	ok.SetDefaults()
	if err := ok.Validate(); err != nil || ok.FlushInterval != time.Second || ok.MaxClients != DefaultMaxClients {
		t.Fatalf("valid config: %v (%+v)", err, ok)
	}
	if _, err := New(ok, Deps{}); err == nil {
		t.Fatal("New without a store succeeded")
	}
}

// The rate-limit stage calls the Book through this interface, and reads RetryAfter from its
// refusals.
var (
	_ interface {
		Charge(clientID string, units uint64) error
	} = (*Book)(nil)
	_ interface{ RetryAfter() time.Duration } = (*ExceededError)(nil)
)

// BenchmarkCharge: the cost of a charge on the request path (no store involved), from
// parallel goroutines over 1000 client ids.
func BenchmarkCharge(b *testing.B) {
	db := openStore(b, storeConfig(b, store.DriverSQLite))
	book, err := New(Config{Enabled: true, Clients: []ClientQuota{{ClientID: "c7", Daily: maxQuota}}}, Deps{DB: db})
	if err != nil {
		b.Fatal(err)
	}
	defer book.Close()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := book.Charge(ids[i%len(ids)], 1); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
