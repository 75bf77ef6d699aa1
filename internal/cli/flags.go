package cli

import (
	"context"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/store"
)

// opened is a command's config, its store and its log (warnings and errors, to stderr).
type opened struct {
	cfg *config.Config
	db  *store.DB
	log *zap.Logger
}

// openStore loads the config at path and opens its store, for the commands that work on the
// store beside a running server or without one. The returned context ends after timeout;
// done closes the store and ends the context.
func openStore(ctx context.Context, path string, stderr io.Writer, timeout time.Duration) (_ context.Context, _ opened, done func(), _ error) {
	cfg, err := (&configFlag{Config: path}).load()
	if err != nil {
		return nil, opened{}, nil, err
	}
	log, err := app.NewLogger("warn", cfg.Cluster.ReplicaID, stderr)
	if err != nil {
		return nil, opened{}, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	db, err := store.Open(ctx, cfg.Store, store.Deps{Logger: log})
	if err != nil {
		cancel()
		return nil, opened{}, nil, err
	}
	return ctx, opened{cfg, db, log}, func() { db.Close(); cancel() }, nil
}
