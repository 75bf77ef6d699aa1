package auth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// openStore opens a real SQLite store in a temporary directory.
func openStore(t testing.TB) *store.DB {
	t.Helper()
	cfg := store.Config{Path: filepath.Join(t.TempDir(), "web3gate.db")}
	cfg.SetDefaults()
	db, err := store.Open(context.Background(), cfg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// observedLogger records every entry at debug and above.
func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// logText renders every recorded entry, message and fields, as one string to search.
func logText(logs *observer.ObservedLogs) string {
	var b strings.Builder
	for _, e := range logs.All() {
		m := e.ContextMap()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "%s %s", e.Level, e.Message)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, m[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// startServer serves routes on a real fasthttp listener and returns its base URL.
func startServer(t testing.TB, log *zap.Logger, routes ...*proxy.Route) string {
	t.Helper()
	s, err := proxy.New(proxy.Config{MaxBodyBytes: 64 << 10, MaxBatch: 10, BatchConcurrency: 1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		// A proxy of the tests: X-Forwarded-For counts only from it (TestTokenEndpointThrottlesForwardedAddress).
		TrustedProxies: []string{trustedProxyIP + "/32"}},
		proxy.Deps{Logger: log, Registry: prometheus.NewRegistry(), Routes: routes, KnownChain: func(uint64) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String()
}

// testClient is an HTTP client that does not share connections between tests.
func testClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// assertNoSecretsLogged fails when any of secrets appears in a recorded entry.
func assertNoSecretsLogged(t testing.TB, logs *observer.ObservedLogs, secrets ...string) {
	t.Helper()
	text := logText(logs)
	if text == "" {
		t.Fatal("nothing was logged: the check would prove nothing")
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Fatalf("a secret (%d bytes) appears in the logs:\n%s", len(s), text)
		}
	}
}
