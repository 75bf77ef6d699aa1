package lease

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/wait"
	"github.com/web3gate/web3gate/store"
)

// The test binary run as a lease holder of its own (TestMain): helperEnv names the kind of
// lease, helperTargetEnv the store directory or the DSN.
const (
	helperEnv       = "WEB3GATE_LEASE_TEST_HOLDER"
	helperTargetEnv = "WEB3GATE_LEASE_TEST_TARGET"
	helperLease     = "confirmer/1"
)

// helperHolder holds helperLease and prints "running" once its job runs, until it is killed
// (or a minute passed: it never outlives its test by long).
func helperHolder() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		l   *Leases
		err error
	)
	switch os.Getenv(helperEnv) {
	case "sqlite":
		cfg := store.Config{Path: filepath.Join(os.Getenv(helperTargetEnv), "web3gate.db")}
		cfg.SetDefaults()
		var db *store.DB
		if db, err = store.Open(ctx, cfg, store.Deps{}); err == nil {
			defer db.Close()
			l, err = NewTable(db, steadyConfig("child"), Deps{})
		}
	case "postgres":
		l, err = NewPostgres(os.Getenv(helperTargetEnv), steadyConfig("child"), Deps{})
	default:
		err = fmt.Errorf("unknown %s", os.Getenv(helperEnv))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer l.Close()
	l.Hold(ctx, helperLease, func(ctx context.Context) {
		fmt.Println("running")
		<-ctx.Done()
	})
	return 0
}

// startChild starts the helper holder and waits until its job runs.
func startChild(t *testing.T, kind, target string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+kind, helperTargetEnv+"="+target)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "running" {
				close(running)
			}
		}
	}()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the child holder did not run its job within 30s")
	}
	return cmd
}

// A holder process killed with SIGKILL on PostgreSQL: the kernel closes its connection, the
// server releases its lock, and the standby takes over; it never ran while the child lived.
func TestKill9TakeoverPostgres(t *testing.T) {
	dsn := testengine.Postgres(t)
	child := startChild(t, "postgres", dsn)
	r := &runs{}
	b := newPostgresHolder(t, dsn, steadyConfig("b"))
	hold(t, b.leases, helperLease, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })
	time.Sleep(steadyConfig("b").LeaseTimeout) // several polls of the standby
	if n, _ := r.starts(); n != 0 {
		t.Fatal("the standby ran the job while the child held the lease")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = child.Wait()
	wait.Within(t, 30*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	t.Logf("b ran the job %s after the kill -9 (check interval %s)", time.Since(killed).Round(time.Millisecond), steadyConfig("b").LeaseCheckInterval)
}

// A holder process killed with SIGKILL on SQLite: nothing releases its lease row; the standby
// takes over once it expired, never before.
func TestKill9TakeoverSQLite(t *testing.T) {
	dir := t.TempDir()
	child := startChild(t, "sqlite", dir)
	r := &runs{}
	b := newTableHolder(t, dir, steadyConfig("b"))
	hold(t, b.leases, helperLease, r, "b")
	wait.Within(t, 10*time.Second, "b stands by", func() bool { return strings.Contains(b.logs.String(), "standing by") })
	time.Sleep(steadyConfig("b").LeaseTimeout) // renewals of the child, polls of the standby
	if n, _ := r.starts(); n != 0 {
		t.Fatal("the standby ran the job while the child held the lease")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = child.Wait()
	db := openStore(t, dir)
	row := leaseRow(t, db, helperLease)
	if !strings.HasPrefix(row.Holder, "child/") {
		t.Fatalf("the lease row after the kill = %+v, want the child's", row)
	}
	wait.Within(t, 30*time.Second, "b takes over", func() bool { return r.runningHolder() == "b" })
	if started := r.lastEvent("b", true); started.Before(row.ExpiresAt) {
		t.Fatalf("b started at %s, before the child's lease expired at %s", started, row.ExpiresAt)
	}
	t.Logf("b ran the job %s after the kill -9 (leaseTimeout %s)", time.Since(killed).Round(time.Millisecond), steadyConfig("b").LeaseTimeout)
}
