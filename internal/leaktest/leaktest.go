// Package leaktest is the goroutine-leak check of the test binaries: their TestMain is
// leaktest.Main (web3gate's servers) or leaktest.MainIgnoring.
package leaktest

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs the tests and, when they pass, fails the binary if goroutines are left besides
// the process-wide ones of the libraries web3gate's servers use. Goroutines that end on
// their own shortly after Close (fasthttp's idle connection cleaner, go-ethereum's
// in-memory node database) get a few seconds first.
func Main(m *testing.M) {
	exit(m, func() error {
		// The test client's idle keep-alive connections are not the servers' goroutines.
		http.DefaultClient.CloseIdleConnections()
		return Settled(serverGoroutines()...)
	})
}

// MainIgnoring is Main for a binary whose process-wide goroutines are those of opts.
func MainIgnoring(m *testing.M, opts ...goleak.Option) {
	exit(m, func() error { return Settled(opts...) })
}

func exit(m *testing.M, check func() error) {
	code := m.Run()
	if code == 0 {
		if err := check(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Settled waits up to 5 s for the goroutines other than those of opts to end, and returns
// goleak's report of those still running.
func Settled(opts ...goleak.Option) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func serverGoroutines() []goleak.Option {
	return []goleak.Option{
		// go-ethereum's process-wide ecrecover workers, started once and never stopped.
		goleak.IgnoreTopFunction("github.com/ethereum/go-ethereum/core.(*txSenderCacher).cache"),
		// fasthttp's process-wide Date header updater, started once and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// A stopped fasthttp server's worker-pool cleaner ends after its idle period (10 s).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// A closed fasthttp client's connection cleaner ends after its idle period (30 s).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	}
}

// Check fails t when goroutines other than the process-wide ones of web3gate's servers are
// still running a few seconds after the servers the test started have stopped. The test
// binary must run no other test at the same time.
func Check(t testing.TB) {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	if err := Settled(serverGoroutines()...); err != nil {
		t.Fatalf("goroutines left running: %v", err)
	}
}
