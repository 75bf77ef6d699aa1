package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/internal/leaktest"
	"github.com/web3gate/web3gate/internal/testproc"
)

// The tests of this package start whole servers one at a time and check that nothing of
// theirs outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }

// shippedConfig is the repository's config.yaml (the embedded dev chain, SQLite) with its
// state in a directory of the test's, free loopback ports and debug logs.
func shippedConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.Server.Listen, cfg.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Store.Path = filepath.Join(dir, "web3gate.db")
	cfg.Wallet.Keys.Dir = filepath.Join(dir, "keystore")
	cfg.Auth.OAuth.SigningKeyFile = filepath.Join(dir, "jwt-signing-key.pem")
	cfg.Log.Level = "debug"
	return cfg
}

// logBuffer collects the server's log lines.
type logBuffer struct{ testproc.Buffer }

// components are the names of the components the log says were started or stopped
// (msg "component started" or "component stopped"), in log order.
func (l *logBuffer) components(t *testing.T, msg string) []string {
	var names []string
	for _, line := range strings.Split(l.String(), "\n") {
		var e struct{ Msg, Component string }
		if line == "" || json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		if e.Msg == msg {
			names = append(names, e.Component)
		}
	}
	return names
}

// TestStartFailureStopsWhatStarted starts the server with a JWT signing key it cannot
// write (its directory is a file): the stages, one of the last components, fail to start;
// Run returns the error named, every component started before is stopped in reverse order,
// the bound ports are free again, and no goroutine is left.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	cfg := shippedConfig(t)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Auth.OAuth.SigningKeyFile = filepath.Join(notDir, "jwt-signing-key.pem")
	api, admin := testproc.FreeAddr(t), testproc.FreeAddr(t)
	cfg.Server.Listen, cfg.Admin.Listen = api, admin
	var logs logBuffer
	err := app.Run(context.Background(), cfg, app.Options{Log: &logs, Ready: func(net.Addr, net.Addr) {
		t.Error("Ready was called")
	}})
	if err == nil || !strings.HasPrefix(err.Error(), "stages: ") {
		t.Fatalf("Run = %v, want the stages' error", err)
	}
	started, stopped := logs.components(t, "component started"), logs.components(t, "component stopped")
	if len(started) < 10 || started[0] != "listeners" || !slices.Contains(started, "devchain") || slices.Contains(started, "stages") {
		t.Fatalf("started %q: want the components before the stages", started)
	}
	slices.Reverse(started)
	if !slices.Equal(stopped, started) {
		t.Fatalf("stopped %q, want the started ones in reverse", stopped)
	}
	for _, addr := range []string{api, admin} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is still bound after the failed start: %v", addr, err)
		}
		ln.Close()
	}
	leaktest.Check(t)
}

// TestTakenPortFailsFirst: with the public or the admin address taken, Run fails before
// any other component starts (no store file, no dev chain), with an error that names the
// key and the flag that set the address.
func TestTakenPortFailsFirst(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name, want string
		set        func(*config.Config, string)
	}{
		{"api", "listeners: server.listen (--listen): listen tcp " + taken.Addr().String() + ": bind: address already in use",
			func(c *config.Config, a string) { c.Server.Listen = a }},
		{"admin", "listeners: admin.listen (--admin-listen): listen tcp " + taken.Addr().String() + ": bind: address already in use",
			func(c *config.Config, a string) { c.Admin.Listen = a }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := shippedConfig(t)
			tc.set(cfg, taken.Addr().String())
			var logs logBuffer
			err := app.Run(context.Background(), cfg, app.Options{Log: &logs})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Run = %v, want %q", err, tc.want)
			}
			if started := logs.components(t, "component started"); len(started) != 0 {
				t.Fatalf("components started before the failure: %q", started)
			}
			if _, err := os.Stat(cfg.Store.Path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the store was opened (%v)", err)
			}
			leaktest.Check(t)
		})
	}
}

// TestSIGTERMStopsInReverse runs the server until the process receives SIGTERM (as main
// does, through signal.NotifyContext): every component is stopped in the reverse of its
// start order, and no goroutine is left.
func TestSIGTERMStopsInReverse(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var logs logBuffer
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, shippedConfig(t), app.Options{Log: &logs, Ready: func(net.Addr, net.Addr) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run = %v before it was ready", err)
	case <-time.After(time.Minute):
		t.Fatal("not ready within a minute")
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after SIGTERM", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of SIGTERM")
	}
	started, stopped := logs.components(t, "component started"), logs.components(t, "component stopped")
	if len(started) == 0 || started[len(started)-1] != "admin listener" {
		t.Fatalf("started %q: want every component, the admin listener last", started)
	}
	slices.Reverse(started)
	if !slices.Equal(stopped, started) {
		t.Fatalf("stopped %q, want the started ones in reverse", stopped)
	}
	leaktest.Check(t)
}
