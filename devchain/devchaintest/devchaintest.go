// Package devchaintest starts the embedded dev chain for tests: the chain, its JSON-RPC served
// over loopback HTTP, and a go-ethereum client of it for the tests' own transactions and
// reads. Everything stops when the test ends.
package devchaintest

import (
	"net/http/httptest"
	"testing"

	"github.com/ethereum/go-ethereum/ethclient"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/devchain"
)

// Chain is a running dev chain of a test.
type Chain struct {
	*devchain.Chain
	URL    string // the chain's JSON-RPC over loopback HTTP
	Client *ethclient.Client
}

// Start starts a dev chain with the default configuration; a failure to start or to close
// it fails the test.
func Start(t testing.TB) *Chain {
	t.Helper()
	chain, err := devchain.Start(devchain.Config{}, devchain.Deps{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := chain.Close(); err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(chain.Handler())
	t.Cleanup(srv.Close)
	client, err := ethclient.Dial(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &Chain{Chain: chain, URL: srv.URL, Client: client}
}
