package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/internal/leaktest"
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
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// components are the names of the components the log says were started or stopped
// (msg "component started" or "component stopped"), in log order.
func (l *logBuffer) components(t *testing.T, msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
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

// TestStartFailureStopsWhatStarted starts the server with its admin address taken: the
// admin listener, one of the last components, fails to start; Run returns its error named,
// every component started before it is stopped in reverse order, and no goroutine is left.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := shippedConfig(t)
	cfg.Admin.Listen = taken.Addr().String()
	var logs logBuffer
	err = app.Run(context.Background(), cfg, app.Options{Log: &logs, Ready: func(net.Addr, net.Addr) {
		t.Error("Ready was called")
	}})
	var opErr *net.OpError
	if !errors.As(err, &opErr) || !strings.HasPrefix(err.Error(), "admin listener: listen "+taken.Addr().String()) {
		t.Fatalf("Run = %v, want the admin listener's listen error", err)
	}
	started, stopped := logs.components(t, "component started"), logs.components(t, "component stopped")
	if len(started) < 10 || !slices.Contains(started, "devchain") || slices.Contains(started, "admin listener") {
		t.Fatalf("started %q: want the components before the admin listener", started)
	}
	slices.Reverse(started)
	if !slices.Equal(stopped, started) {
		t.Fatalf("stopped %q, want the started ones in reverse", stopped)
	}
	leaktest.Check(t)
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
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
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
	if len(started) == 0 || started[len(started)-1] != "api listener" {
		t.Fatalf("started %q: want every component, the api listener last", started)
	}
	slices.Reverse(started)
	if !slices.Equal(stopped, started) {
		t.Fatalf("stopped %q, want the started ones in reverse", stopped)
	}
	leaktest.Check(t)
}
