// Package leaktest is the goroutine-leak check of the test binaries that run web3gate's
// servers: their TestMain is leaktest.Main.
package leaktest

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs the tests and, when they pass, fails the binary if goroutines are left:
// goroutines that end on their own shortly after Close (fasthttp's idle connection cleaner,
// go-ethereum's in-memory node database) get a few seconds first.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := settled(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func settled() error {
	opts := []goleak.Option{
		// go-ethereum's process-wide ecrecover workers, started once and never stopped.
		goleak.IgnoreTopFunction("github.com/ethereum/go-ethereum/core.(*txSenderCacher).cache"),
		// fasthttp's process-wide Date header updater, started once and never stopped.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// A stopped fasthttp server's worker-pool cleaner ends after its idle period (10 s).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// A closed fasthttp client's connection cleaner ends after its idle period (30 s).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	}
	// The test client's idle keep-alive connections are not the servers' goroutines.
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
