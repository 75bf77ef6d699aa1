package lease

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/store"
)

// openStore opens (migrating) the SQLite store in dir; each call is a separate set of
// connections, as another process would have.
func openStore(t *testing.T, dir string) *store.DB {
	t.Helper()
	cfg := store.Config{Path: filepath.Join(dir, "web3gate.db")}
	cfg.SetDefaults()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// tableHolder is a Leases on its own connections to the store in dir, whose renewals and
// releases do not happen while hang is set.
type tableHolder struct {
	*holder
	hang atomic.Bool
}

func newTableHolder(t *testing.T, dir string, cfg Config) *tableHolder {
	t.Helper()
	replica := cfg.ReplicaID
	deps, reg, logs := testDeps(replica)
	l, err := NewTable(openStore(t, dir), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	h := &tableHolder{holder: &holder{name: replica, leases: l, reg: reg, logs: logs}}
	l.b.(*table).stalled = func(string) bool { return h.hang.Load() }
	t.Cleanup(func() { _ = l.Close() })
	return h
}

func leaseRow(t *testing.T, db *store.DB, name string) *store.Lease {
	t.Helper()
	var l *store.Lease
	if err := db.Read(context.Background(), func(tx *store.DBTx) error {
		var err error
		l, err = tx.Lease(context.Background(), name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

// Three processes' worth of holders on one SQLite file: one runs the job at any time, the
// others stand by; a holder that stops renewing loses the lease (its job cancelled) and
// another takes over once the lease expired. Repeated, over a few seconds.
func TestTableOneHolderAtATime(t *testing.T) {
	dir := t.TempDir()
	const name = "confirmer/1"
	r := &runs{}
	hs := map[string]*tableHolder{}
	for _, id := range []string{"a", "b", "c"} {
		hs[id] = newTableHolder(t, dir, fastConfig(id))
		hold(t, hs[id].leases, name, r, id)
	}
	wait.Within(t, 10*time.Second, "a first holder runs the job", func() bool { return r.runningHolder() != "" })
	wait.Within(t, 10*time.Second, "every holder shows web3gate_lease_held", func() bool {
		for _, h := range hs {
			if heldGauge(h.reg, name) < 0 {
				return false
			}
		}
		return true
	})
	const losses = 4
	for i := range losses {
		cur := r.runningHolder()
		if cur == "" {
			t.Fatalf("round %d: no job runs", i)
		}
		for id, h := range hs {
			if id != cur && heldGauge(h.reg, name) != 0 {
				t.Fatalf("round %d: %s runs the job but %s shows web3gate_lease_held %v", i, cur, id, heldGauge(h.reg, name))
			}
		}
		if heldGauge(hs[cur].reg, name) != 1 {
			t.Fatalf("round %d: the holder %s shows web3gate_lease_held %v", i, cur, heldGauge(hs[cur].reg, name))
		}
		hs[cur].hang.Store(true)
		took := wait.Within(t, 30*time.Second, "another holder takes over from "+cur, func() bool {
			h := r.runningHolder()
			return h != "" && h != cur
		})
		hs[cur].hang.Store(false)
		t.Logf("round %d: %s stopped renewing; %s took over %s later", i, cur, r.runningHolder(), took.Round(time.Millisecond))
	}
	r.checkExclusive(t)
	var lost float64
	for _, h := range hs {
		lost += counter(t, h.reg, "web3gate_lease_losses_total", name)
	}
	if lost < losses {
		t.Fatalf("web3gate_lease_losses_total sums to %v over the holders, want at least %d", lost, losses)
	}
}

// A holder that hangs (stops renewing, its job still running until cancelled): its own job
// is cancelled before the lease expires, and the standby starts only after the expiry, never
// while the first job could still run.
func TestTableFailoverAfterHang(t *testing.T) {
	dir := t.TempDir()
	const name = "owners-indexer/1"
	r := &runs{}
	a := newTableHolder(t, dir, steadyConfig("a"))
	hold(t, a.leases, name, r, "a")
	wait.Within(t, 10*time.Second, "a runs the job", func() bool { return r.runningHolder() == "a" })
	b := newTableHolder(t, dir, steadyConfig("b"))
	hold(t, b.leases, name, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })
	if heldGauge(b.reg, name) != 0 || heldGauge(a.reg, name) != 1 {
		t.Fatalf("web3gate_lease_held: a %v, b %v; want 1 and 0", heldGauge(a.reg, name), heldGauge(b.reg, name))
	}
	db := openStore(t, dir)
	before := leaseRow(t, db, name)

	a.hang.Store(true)
	wait.Within(t, 30*time.Second, "a's job is cancelled", func() bool { return r.runningHolder() != "a" })
	row := leaseRow(t, db, name) // a's last renewal: nobody may start before its expiry
	wait.Within(t, 30*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	r.checkExclusive(t)
	aStopped, bStarted := r.lastEvent("a", false), r.lastEvent("b", true)
	if !bStarted.After(aStopped) {
		t.Fatalf("b started at %s, before a's job stopped at %s", bStarted, aStopped)
	}
	if row.Holder != before.Holder || bStarted.Before(row.ExpiresAt) {
		t.Fatalf("b started at %s, before a's lease (%s, epoch %d) expired at %s", bStarted, row.Holder, row.Epoch, row.ExpiresAt)
	}
	after := leaseRow(t, db, name)
	if !strings.HasPrefix(after.Holder, "b/") || after.Epoch != row.Epoch+1 {
		t.Fatalf("lease after the takeover = %+v, want b's at epoch %d", after, row.Epoch+1)
	}
	if !strings.Contains(a.logs.String(), `"msg":"lease lost: the job is cancelled"`) || !strings.Contains(a.logs.String(), "not renewed within") {
		t.Fatalf("a's logs do not tell the loss and why:\n%s", a.logs.String())
	}
	for _, want := range []string{`"msg":"lease acquired"`, `"replica":"b"`, `"lease":"owners-indexer/1"`} {
		if !strings.Contains(b.logs.String(), want) {
			t.Fatalf("b's logs lack %s:\n%s", want, b.logs.String())
		}
	}
	if got := counter(t, a.reg, "web3gate_lease_losses_total", name); got != 1 {
		t.Fatalf("a's web3gate_lease_losses_total = %v, want 1", got)
	}
	if got := counter(t, b.reg, "web3gate_lease_acquisitions_total", name); got != 1 {
		t.Fatalf("b's web3gate_lease_acquisitions_total = %v, want 1", got)
	}
	t.Logf("a's job stopped %s before its lease expired; b started %s after the expiry",
		row.ExpiresAt.Sub(aStopped).Round(time.Millisecond), bStarted.Sub(row.ExpiresAt).Round(time.Millisecond))
}

// A holder that stops releases its lease: the standby does not wait for the expiry.
func TestTableReleaseOnStop(t *testing.T) {
	dir := t.TempDir()
	const name = "confirmer/7"
	r := &runs{}
	a := newTableHolder(t, dir, steadyConfig("a"))
	stopA := hold(t, a.leases, name, r, "a")
	wait.Within(t, 10*time.Second, "a runs the job", func() bool { return r.runningHolder() == "a" })
	b := newTableHolder(t, dir, steadyConfig("b"))
	hold(t, b.leases, name, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })
	db := openStore(t, dir)
	held := leaseRow(t, db, name)
	stopA()
	// a's row, expired by the release; or already b's, when b's check came between the
	// release and this read, taken before a's lease would have expired.
	released := leaseRow(t, db, name)
	switch {
	case strings.HasPrefix(released.Holder, "a/"):
		if !released.ExpiresAt.Before(held.ExpiresAt) || released.ExpiresAt.After(time.Now()) {
			t.Fatalf("after a stopped the lease is %+v (it was %+v): want a's, expired", released, held)
		}
	case strings.HasPrefix(released.Holder, "b/"):
		if released.Epoch != held.Epoch+1 || !released.AcquiredAt.Before(held.ExpiresAt) {
			t.Fatalf("after a stopped the lease is %+v (it was %+v): want b's at the next epoch, before a's expiry", released, held)
		}
	default:
		t.Fatalf("after a stopped the lease is %+v (it was %+v)", released, held)
	}
	took := wait.Within(t, 30*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	r.checkExclusive(t)
	if !strings.Contains(a.logs.String(), `"msg":"lease released"`) {
		t.Fatalf("a's logs lack the release:\n%s", a.logs.String())
	}
	if got := a.leases.HeldLeases(); len(got) != 0 {
		t.Fatalf("a still lists %+v", got)
	}
	if got := b.leases.HeldLeases(); len(got) != 1 || got[0].Name != name || got[0].Epoch != held.Epoch+1 {
		t.Fatalf("b lists %+v, want %s at epoch %d", got, name, held.Epoch+1)
	}
	t.Logf("b took over %s after a stopped", took.Round(time.Millisecond))
}

// TestTableSameReplicaTakesOverAtOnce: a process of the same replica as a holder that died
// holding the lease (a single process restarted after a crash) takes the lease at once,
// before its expiry; its job runs at start, as it did before leases.
func TestTableSameReplicaTakesOverAtOnce(t *testing.T) {
	dir := t.TempDir()
	const name = "confirmer/1"
	first, second := &runs{}, &runs{}
	// A lease far longer than the takeover may take, so that "before its expiry" says "at
	// once" even on a loaded machine: with 3 s, a run under -race beside other packages'
	// tests took 4.7 s from the hang to the restarted process's start.
	cfg := Config{ReplicaID: "r", LeaseTimeout: 30 * time.Second, LeaseCheckInterval: 300 * time.Millisecond}
	a := newTableHolder(t, dir, cfg)
	hold(t, a.leases, name, first, "a")
	wait.Within(t, 10*time.Second, "the first process runs the job", func() bool { return first.runningHolder() == "a" })
	a.hang.Store(true) // dead: no renewal, no release
	db := openStore(t, dir)
	expires := leaseRow(t, db, name).ExpiresAt

	b := newTableHolder(t, dir, cfg)
	hold(t, b.leases, name, second, "b")
	wait.Within(t, 10*time.Second, "the restarted process runs the job", func() bool { return second.runningHolder() == "b" })
	if started := second.lastEvent("b", true); !started.Before(expires) {
		t.Fatalf("the restarted process started the job at %s, after its predecessor's lease expired (%s)", started, expires)
	}
	if row := leaseRow(t, db, name); !strings.HasPrefix(row.Holder, "r/") || row.Epoch != 2 {
		t.Fatalf("lease row %+v, want the restarted process at epoch 2", row)
	}
}
