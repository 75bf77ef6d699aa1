package lease

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
)

func newPostgresHolder(t *testing.T, dsn string, cfg Config) *holder {
	t.Helper()
	replica := cfg.ReplicaID
	deps, reg, logs := testDeps(replica)
	l, err := NewPostgres(dsn, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &holder{name: replica, leases: l, reg: reg, logs: logs}
}

// adminConn is a connection of the test's own to its database.
func adminConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// lockHolder is the server process id of the session holding the advisory lock of name in the
// test database, 0 when none does.
func lockHolder(t *testing.T, admin *pgx.Conn, dsn, name string) uint32 {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	key := Key(strings.TrimPrefix(u.Path, "/"), "", name)
	var pid uint32
	err = admin.QueryRow(context.Background(), `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND classid::bigint = $1 AND objid::bigint = $2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(uint64(key)>>32), int64(uint32(key))).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func terminate(t *testing.T, admin *pgx.Conn, pid uint32) {
	t.Helper()
	var ok bool
	if err := admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, ok, err)
	}
}

// Three holders, each on its own connection: one runs the job at any time, the others stand
// by; the holder's session is terminated by the server, again and again: its job is cancelled
// and the lease passes on (to a standby or, after reconnecting, to the same holder).
func TestPostgresOneHolderAtATime(t *testing.T) {
	dsn := testengine.Postgres(t)
	admin := adminConn(t, dsn)
	const name = "confirmer/1"
	r := &runs{}
	hs := map[string]*holder{}
	for _, id := range []string{"a", "b", "c"} {
		hs[id] = newPostgresHolder(t, dsn, fastConfig(id))
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
	const losses = 10
	for i := range losses {
		cur := r.runningHolder()
		if cur == "" {
			t.Fatalf("round %d: no job runs", i)
		}
		for id, h := range hs {
			if want := map[bool]float64{true: 1, false: 0}[id == cur]; heldGauge(h.reg, name) != want {
				t.Fatalf("round %d: %s runs the job; %s shows web3gate_lease_held %v", i, cur, id, heldGauge(h.reg, name))
			}
		}
		pid := lockHolder(t, admin, dsn, name)
		if pid == 0 {
			t.Fatalf("round %d: %s runs the job and no session holds the lock", i, cur)
		}
		n, _ := r.starts()
		terminate(t, admin, pid)
		took := wait.Within(t, 30*time.Second, "the job runs again", func() bool {
			m, _ := r.starts()
			return m > n && r.runningHolder() != ""
		})
		t.Logf("round %d: %s's session terminated; %s runs the job %s later", i, cur, r.runningHolder(), took.Round(time.Millisecond))
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

// The holder's session is terminated by the server: its job is cancelled at once (before the
// next heartbeat), with "lease lost" logged and counted.
func TestPostgresTerminatedSessionCancelsTheJob(t *testing.T) {
	dsn := testengine.Postgres(t)
	admin := adminConn(t, dsn)
	const name = "owners-indexer/5"
	r := &runs{}
	a := newPostgresHolder(t, dsn, steadyConfig("a"))
	hold(t, a.leases, name, r, "a")
	wait.Within(t, 10*time.Second, "a runs the job", func() bool { return r.runningHolder() == "a" })
	terminate(t, admin, lockHolder(t, admin, dsn, name))
	stopped := wait.Within(t, 10*time.Second, "a's job is cancelled", func() bool { return r.runningHolder() != "a" })
	wait.Within(t, 10*time.Second, "a holds the lease again on a new session", func() bool { return r.runningHolder() == "a" })
	logs := a.logs.String()
	for _, want := range []string{`"msg":"lease lost: the job is cancelled"`, "the PostgreSQL session holding it ended",
		`"msg":"lease: the PostgreSQL session ended: its leases are lost; reconnecting"`, `"replica":"a"`} {
		if !strings.Contains(logs, want) {
			t.Fatalf("logs lack %s:\n%s", want, logs)
		}
	}
	if got := counter(t, a.reg, "web3gate_lease_losses_total", name); got != 1 {
		t.Fatalf("web3gate_lease_losses_total = %v, want 1", got)
	}
	if got := counter(t, a.reg, "web3gate_lease_acquisitions_total", name); got != 2 {
		t.Fatalf("web3gate_lease_acquisitions_total = %v, want 2", got)
	}
	t.Logf("the job was cancelled %s after the termination (heartbeat every %s)", stopped.Round(time.Millisecond), steadyConfig("a").LeaseCheckInterval)
}

// A holder that stops releases its lock: the standby takes over at its next poll.
func TestPostgresReleaseOnStop(t *testing.T) {
	dsn := testengine.Postgres(t)
	admin := adminConn(t, dsn)
	const name = "confirmer/2"
	r := &runs{}
	a := newPostgresHolder(t, dsn, steadyConfig("a"))
	stopA := hold(t, a.leases, name, r, "a")
	wait.Within(t, 10*time.Second, "a runs the job", func() bool { return r.runningHolder() == "a" })
	b := newPostgresHolder(t, dsn, steadyConfig("b"))
	hold(t, b.leases, name, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })
	aPID := lockHolder(t, admin, dsn, name)
	stopA()
	if !strings.Contains(a.logs.String(), `"msg":"lease released"`) {
		t.Fatalf("a's logs lack the release:\n%s", a.logs.String())
	}
	took := wait.Within(t, 10*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	r.checkExclusive(t)
	if pid := lockHolder(t, admin, dsn, name); pid == 0 || pid == aPID {
		t.Fatalf("the lock is held by pid %d after the takeover (a's session was %d)", pid, aPID)
	}
	if got := b.leases.HeldLeases(); len(got) != 1 || got[0].Name != name {
		t.Fatalf("b lists %+v", got)
	}
	t.Logf("b took over %s after a stopped", took.Round(time.Millisecond))
}

// The holder's connection closes (its end, as when its process dies): the server releases the
// lock and a standby takes over, while the holder, unable to connect again, has cancelled its
// job.
func TestPostgresConnectionClosedFailover(t *testing.T) {
	dsn := testengine.Postgres(t)
	p := newTCPProxy(t, dsn)
	const name = "confirmer/3"
	r := &runs{}
	a := newPostgresHolder(t, p.dsn, steadyConfig("a"))
	hold(t, a.leases, name, r, "a")
	wait.Within(t, 10*time.Second, "a runs the job", func() bool { return r.runningHolder() == "a" })
	b := newPostgresHolder(t, dsn, steadyConfig("b"))
	hold(t, b.leases, name, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })

	p.cut()
	took := wait.Within(t, 30*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	r.checkExclusive(t)
	if heldGauge(a.reg, name) != 0 || heldGauge(b.reg, name) != 1 {
		t.Fatalf("web3gate_lease_held: a %v, b %v", heldGauge(a.reg, name), heldGauge(b.reg, name))
	}
	t.Logf("b took over %s after a's connection closed", took.Round(time.Millisecond))
}

// The holder is cut off from the server without either end closing (a network partition, a
// host that froze): the holder's heartbeat times out and cancels its job; the server ends the
// silent session after idle_session_timeout, and only then a standby takes over.
func TestPostgresPartitionFailover(t *testing.T) {
	dsn := testengine.Postgres(t)
	p := newTCPProxy(t, dsn)
	const name = "owners-indexer/3"
	r := &runs{}
	a := newPostgresHolder(t, p.dsn, steadyConfig("a"))
	hold(t, a.leases, name, r, "a")
	wait.Within(t, 10*time.Second, "a runs the job", func() bool { return r.runningHolder() == "a" })
	b := newPostgresHolder(t, dsn, steadyConfig("b"))
	hold(t, b.leases, name, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })

	p.partition()
	cut := time.Now()
	wait.Within(t, 30*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	r.checkExclusive(t)
	aStopped, bStarted := r.lastEvent("a", false), r.lastEvent("b", true)
	if !bStarted.After(aStopped) {
		t.Fatalf("b started at %s, before a's job stopped at %s", bStarted, aStopped)
	}
	if !strings.Contains(a.logs.String(), "heartbeat") {
		t.Fatalf("a's loss does not name the heartbeat:\n%s", a.logs.String())
	}
	t.Logf("partition: a's job cancelled %s after the cut, b started %s after it (idle_session_timeout %s)",
		aStopped.Sub(cut).Round(time.Millisecond), bStarted.Sub(cut).Round(time.Millisecond), steadyConfig("a").timings().idleSession)
}

// An unreachable server: the Hold waits (the job never runs), the failure is logged once, and
// Hold returns when its context ends.
func TestPostgresUnreachableWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	h := newPostgresHolder(t, "postgres://postgres:s3cret@"+addr+"/web3gate?sslmode=disable", fastConfig("a"))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var ran atomic.Bool
	h.leases.Hold(ctx, "confirmer/1", func(context.Context) { ran.Store(true) })
	if ran.Load() {
		t.Fatal("the job ran without a lease")
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "connecting to PostgreSQL failed"); n != 1 {
		t.Fatalf("the connection failure is logged %d times, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, "s3cret") {
		t.Fatalf("the password is in the logs:\n%s", logs)
	}
}

func TestPostgresBadDSN(t *testing.T) {
	_, err := NewPostgres("postgres://u:s3cret@127.0.0.1:5432/db?sslmode=bogus", fastConfig("a"), Deps{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v: want one, without the password", err)
	}
	if _, err := NewPostgres("postgres://127.0.0.1/db", Config{ReplicaID: "a"}, Deps{}); err == nil || !strings.Contains(err.Error(), "leaseTimeout") {
		t.Fatalf("an invalid config: %v", err)
	}
}

// tcpProxy forwards connections to the PostgreSQL server of a DSN; cut closes them all and
// refuses new ones (the holder's end closed, as when its process dies); partition stops every
// byte both ways without closing anything, and holds new connections unanswered.
type tcpProxy struct {
	dsn    string
	target string
	ln     net.Listener

	mu          sync.Mutex
	conns       []net.Conn
	partitioned atomic.Bool
	wg          sync.WaitGroup
}

func newTCPProxy(t *testing.T, dsn string) *tcpProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: u.Host, ln: ln, conns: []net.Conn{}}
	u.Host = ln.Addr().String()
	p.dsn = u.String()
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		if p.partitioned.Load() {
			continue // held unanswered
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(s) {
			return
		}
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

// pipe copies from to to; while partitioned it drops what it reads, and an end that closes
// is not passed on.
func (p *tcpProxy) pipe(from, to net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !p.partitioned.Load() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !p.partitioned.Load() {
				_ = to.Close()
			}
			return
		}
	}
}

func (p *tcpProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = p.conns[:0]
}

func (p *tcpProxy) partition() { p.partitioned.Store(true) }

func (p *tcpProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
