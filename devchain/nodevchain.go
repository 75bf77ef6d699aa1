//go:build nodevchain

// A build without the embedded dev chain: `go build -tags nodevchain`. The dev node links the
// whole go-ethereum node (the eth service, its databases, the P2P stack, the RPC server whose
// reflection keeps every exported method of the program in the binary): without it the binary
// is a third smaller and an idle gateway's RSS 13 MiB lower (docs/performance.md,
// "Footprint"). A config with devchain.enabled fails to start with ErrNotBuilt.

package devchain

import (
	"errors"
	"net/http"

	"go.uber.org/zap"
)

// ErrNotBuilt is Start's error in a binary built with -tags nodevchain.
var ErrNotBuilt = errors.New("this binary is built without the embedded dev chain (go build -tags nodevchain): set devchain.enabled: false and give the chains real upstreams, or use a build without the tag")

// Deps are the dependencies of a Chain.
type Deps struct {
	Logger *zap.Logger // nil: no logs
}

// Chain is never made in this build.
type Chain struct{}

// Start fails with ErrNotBuilt.
func Start(Config, Deps) (*Chain, error) { return nil, ErrNotBuilt }

// ChainID is 0: no Chain exists in this build.
func (c *Chain) ChainID() uint64 { return 0 }

// Accounts is nil: no Chain exists in this build.
func (c *Chain) Accounts() []Account { return nil }

// Handler is nil: no Chain exists in this build.
func (c *Chain) Handler() http.Handler { return nil }

// Close does nothing: no Chain exists in this build.
func (c *Chain) Close() error { return nil }
