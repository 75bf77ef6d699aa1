package cli

import (
	"context"
	"flag"
	"io"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/store"
)

// openStore loads the config at path and opens its store, for the commands that work on the
// store beside a running server or without one; their log (warnings and errors) goes to
// stderr.
func openStore(ctx context.Context, path string, stderr io.Writer) (*config.Config, *store.DB, *zap.Logger, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, nil, err
	}
	log, err := app.NewLogger("warn", cfg.Cluster.ReplicaID, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := store.Open(ctx, cfg.Store, store.Deps{Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, db, log, nil
}

// parseInterspersed parses flags that may come before or after the positional arguments
// (`accounts import KEYFILE --owner alice`), and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
