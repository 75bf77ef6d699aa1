package lease

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/internal/testproc"
	"github.com/web3gate/web3gate/internal/wait"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperHolder())
	}
	leaktest.Main(m)
}

// fastConfig is the shortest lease timeout allowed, a check every 200ms: for the tests that
// force losses and check that jobs never overlap, whatever else happens.
func fastConfig(replica string) Config {
	return Config{ReplicaID: replica, LeaseTimeout: time.Second, LeaseCheckInterval: 200 * time.Millisecond}
}

// steadyConfig has timings loose enough that a loaded machine (the race detector, other
// tests) does not lose a lease by itself: for the tests that check a sequence of events.
func steadyConfig(replica string) Config {
	return Config{ReplicaID: replica, LeaseTimeout: 3 * time.Second, LeaseCheckInterval: 300 * time.Millisecond}
}

// runs records the runs of the jobs of several holders of one lease: how many run at once
// (never more than one), and in which order they started and stopped.
type runs struct {
	running  atomic.Int32
	overlaps atomic.Int32

	mu     sync.Mutex
	events []runEvent
}

type runEvent struct {
	holder string
	start  bool
	at     time.Time
}

// job is holder's job: it runs until its context ends.
func (r *runs) job(holder string) func(ctx context.Context) {
	return func(ctx context.Context) {
		if r.running.Add(1) > 1 {
			r.overlaps.Add(1)
		}
		r.record(holder, true)
		<-ctx.Done()
		r.record(holder, false)
		r.running.Add(-1)
	}
}

func (r *runs) record(holder string, start bool) {
	r.mu.Lock()
	r.events = append(r.events, runEvent{holder, start, time.Now()})
	r.mu.Unlock()
}

// starts is the number of job starts so far, and the holder of the last one.
func (r *runs) starts() (n int, last string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.start {
			n++
			last = e.holder
		}
	}
	return n, last
}

// runningHolder is the holder whose job runs now ("" when none).
func (r *runs) runningHolder() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 || !r.events[len(r.events)-1].start {
		return ""
	}
	return r.events[len(r.events)-1].holder
}

// lastEvent is the time of the last event of holder of that kind.
func (r *runs) lastEvent(holder string, start bool) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if e := r.events[i]; e.holder == holder && e.start == start {
			return e.at
		}
	}
	return time.Time{}
}

// checkExclusive fails t when two jobs ever ran at once.
func (r *runs) checkExclusive(t *testing.T) {
	t.Helper()
	if n := r.overlaps.Load(); n > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		var b strings.Builder
		for _, e := range r.events {
			fmt.Fprintf(&b, "\n  %s %s start=%v", e.at.Format("15:04:05.000"), e.holder, e.start)
		}
		t.Fatalf("two jobs ran at once %d times:%s", n, b.String())
	}
}

// holder is one Leases and its Hold of one lease, with its own logs and metrics.
type holder struct {
	name   string
	leases *Leases
	reg    *prometheus.Registry
	logs   *testproc.Buffer
	cancel context.CancelFunc
	done   chan struct{}
}

// testDeps are Deps with a JSON logger into logs and a fresh registry; the root logger
// carries the replica id, as run.go's does.
func testDeps(replica string) (Deps, *prometheus.Registry, *testproc.Buffer) {
	logs := &testproc.Buffer{}
	enc := zap.NewProductionEncoderConfig()
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(logs), zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	return Deps{Logger: zap.New(core).With(zap.String("replica", replica)), Registry: reg}, reg, logs
}

// hold starts l.Hold(name) with r's job in the background; stop cancels it and waits.
func hold(t *testing.T, l *Leases, name string, r *runs, who string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Hold(ctx, name, r.job(who))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

func heldGauge(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != "web3gate_lease_held" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "lease" && lp.GetValue() == name {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func counter(t *testing.T, reg *prometheus.Registry, metric, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "lease" && lp.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	host, _ := os.Hostname()
	if c.ReplicaID == "" || host != "" && !strings.HasPrefix(host, c.ReplicaID[:1]) {
		t.Fatalf("replicaId default = %q, host name %q", c.ReplicaID, host)
	}
	if c.LeaseTimeout != 10*time.Second || c.LeaseCheckInterval != 2*time.Second {
		t.Fatalf("defaults = %+v, want leaseTimeout 10s, leaseCheckInterval 2s", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	c = Config{LeaseTimeout: 30 * time.Second}
	c.SetDefaults()
	if c.LeaseCheckInterval != 6*time.Second {
		t.Fatalf("leaseCheckInterval derived from leaseTimeout 30s = %s, want 6s", c.LeaseCheckInterval)
	}
}

// The timings keep their promises at the defaults and at the limits validation allows.
func TestConfigTimings(t *testing.T) {
	for _, c := range []Config{
		{LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2 * time.Second},
		{LeaseTimeout: time.Second, LeaseCheckInterval: 250 * time.Millisecond},
		{LeaseTimeout: time.Second, LeaseCheckInterval: 10 * time.Millisecond},
		{LeaseTimeout: time.Minute, LeaseCheckInterval: 15 * time.Second},
	} {
		c.ReplicaID = "r"
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		tm := c.timings()
		// PostgreSQL: a silent holder cancels its jobs (two checks after its last heartbeat)
		// before the server drops its session; a standby then starts within leaseTimeout.
		if 2*tm.check >= tm.idleSession {
			t.Errorf("%+v: the holder gives up at %s, not before the server ends its session at %s", c, 2*tm.check, tm.idleSession)
		}
		if tm.idleSession+tm.check+tm.grace > c.LeaseTimeout {
			t.Errorf("%+v: a standby starts up to %s after a holder hung, more than leaseTimeout", c, tm.idleSession+tm.check+tm.grace)
		}
		// Rows: the holder gives up before the expiry, renews at least twice before giving
		// up, and a standby starts within leaseTimeout of the holder's death.
		if tm.giveUp >= tm.ttl || tm.renew*2 > tm.giveUp {
			t.Errorf("%+v: ttl %s, renewal every %s, give-up after %s", c, tm.ttl, tm.renew, tm.giveUp)
		}
		if tm.ttl+tm.check > c.LeaseTimeout {
			t.Errorf("%+v: a standby starts up to %s after a holder died, more than leaseTimeout", c, tm.ttl+tm.check)
		}
	}
}

func TestConfigValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ReplicaID: "", LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2 * time.Second}, "replicaId"},
		{Config{ReplicaID: "a b", LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2 * time.Second}, "replicaId"},
		{Config{ReplicaID: "-a", LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2 * time.Second}, "replicaId"},
		{Config{ReplicaID: strings.Repeat("a", 64), LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2 * time.Second}, "replicaId"},
		{Config{ReplicaID: "a", LeaseTimeout: 999 * time.Millisecond, LeaseCheckInterval: 100 * time.Millisecond}, "leaseTimeout: must be at least 1s"},
		{Config{ReplicaID: "a", LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2501 * time.Millisecond}, "leaseCheckInterval: must be at most leaseTimeout/4"},
		{Config{ReplicaID: "a", LeaseTimeout: 10 * time.Second, LeaseCheckInterval: time.Millisecond}, "leaseCheckInterval: must be at least 10ms"},
		{Config{ReplicaID: "a", LeaseTimeout: 10 * time.Second, LeaseCheckInterval: 2 * time.Second, LeaseNamespace: strings.Repeat("n", 201)}, "leaseNamespace"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.cfg, err, c.want)
		}
	}
	ok := Config{ReplicaID: "web3gate-0.eu_west:1", LeaseTimeout: time.Second, LeaseCheckInterval: 250 * time.Millisecond}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The key derivation is documented (docs/leases.md): it must not change between versions,
// or replicas of two versions would both hold a lease during a rolling upgrade.
func TestKeyIsStable(t *testing.T) {
	for _, c := range []struct {
		database, namespace, name string
		want                      int64
	}{
		{"web3gate", "", "confirmer/1", keyOf(t, "web3gate", "", "confirmer/1")},
	} {
		if got := Key(c.database, c.namespace, c.name); got != c.want {
			t.Fatalf("Key(%q, %q, %q) = %d, want %d", c.database, c.namespace, c.name, got, c.want)
		}
	}
	if Key("web3gate", "", "confirmer/1") != -1307491224746302804 {
		t.Fatalf("Key(web3gate, \"\", confirmer/1) = %d: the derivation changed", Key("web3gate", "", "confirmer/1"))
	}
	distinct := map[int64]string{}
	for _, in := range [][3]string{
		{"web3gate", "", "confirmer/1"}, {"web3gate", "", "confirmer/10"}, {"web3gate", "", "owners-indexer/1"},
		{"other", "", "confirmer/1"}, {"web3gate", "blue", "confirmer/1"}, {"web3gate", "", "confirmer/1\x00"},
		{"web3gate\x00", "", "confirmer/1"},
	} {
		k := Key(in[0], in[1], in[2])
		if prev, ok := distinct[k]; ok {
			t.Fatalf("%q and %s have the same key", in, prev)
		}
		distinct[k] = fmt.Sprintf("%q", in)
	}
}

// keyOf recomputes the documented derivation independently of Key.
func keyOf(t *testing.T, database, namespace, name string) int64 {
	t.Helper()
	var in []byte
	for _, s := range []string{"web3gate lease", database, namespace, name} {
		in = append(append(in, s...), 0)
	}
	sum := sha256.Sum256(in)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Two Holds of one name in one process take turns; Hold returns when its ctx ends while it
// waits for the other.
func TestHoldSameNameInOneProcessTakesTurns(t *testing.T) {
	db := openStore(t, t.TempDir())
	deps, _, _ := testDeps("a")
	l, err := NewTable(db, fastConfig("a"), deps)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := &runs{}
	stopA := hold(t, l, "job", r, "a1")
	wait.Within(t, 10*time.Second, "the first Hold runs its job", func() bool { return r.runningHolder() == "a1" })
	stopB := hold(t, l, "job", r, "a2")
	stopA()
	wait.Within(t, 10*time.Second, "the second Hold runs its job after the first stopped", func() bool { return r.runningHolder() == "a2" })
	stopB()
	r.checkExclusive(t)
	if got := l.HeldLeases(); len(got) != 0 {
		t.Fatalf("held after both stopped: %+v", got)
	}
}

// A job that returns on its own, the lease still held, runs again; its lease is released in
// between.
func TestHoldRestartsAJobThatReturned(t *testing.T) {
	db := openStore(t, t.TempDir())
	deps, reg, logs := testDeps("a")
	l, err := NewTable(db, fastConfig("a"), deps)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Hold(ctx, "job", func(context.Context) { n.Add(1) })
	}()
	wait.Within(t, 10*time.Second, "the job ran three times", func() bool { return n.Load() >= 3 })
	cancel()
	<-done
	if got := counter(t, reg, "web3gate_lease_acquisitions_total", "job"); got < 3 {
		t.Fatalf("acquisitions = %v, want at least 3", got)
	}
	if got := strings.Count(logs.String(), `"msg":"lease released"`); got < 3 {
		t.Fatalf("%d releases logged, want at least 3:\n%s", got, logs.String())
	}
	if heldGauge(reg, "job") != 0 {
		t.Fatal("web3gate_lease_held is not 0 after the Hold returned")
	}
}
