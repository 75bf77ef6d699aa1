package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/store"
)

// storeMigrateCmd applies the pending migrations of the configured store and exits, whatever
// store.migrate says: for operators who keep replicas from migrating at start
// (store.migrate: never).
type storeMigrateCmd struct{ configFlag }

func (c *storeMigrateCmd) Run(ctx context.Context, env Env) error {
	stdout := env.Stdout
	cfg, err := c.load()
	if err != nil {
		return err
	}
	log, err := app.NewLogger("info", cfg.Cluster.ReplicaID, env.Stderr)
	if err != nil {
		return err
	}
	from, to, err := store.Migrate(ctx, cfg.Store, store.Deps{Logger: log.Named("store")})
	if err != nil {
		return err
	}
	if from == to {
		fmt.Fprintf(stdout, "store: schema version %d, nothing to migrate\n", to)
	} else {
		fmt.Fprintf(stdout, "store: migrated from schema version %d to %d\n", from, to)
	}
	return nil
}

// storeCopyCmd copies a SQLite store into an empty PostgreSQL database (store.Copy).
type storeCopyCmd struct {
	From string `placeholder:"sqlite:PATH" help:"The source: sqlite:PATH."`
	To   string `placeholder:"postgres:DSN" help:"The target: postgres:DSN, DSN a postgres:// URL or key=value pairs (or give --config)."`
	// Not configFlag: the file is the target here, given on purpose, never from the environment.
	Config string `placeholder:"FILE" help:"A configuration file whose store section (driver postgres) is the target."`
}

const storeCopyUsage = "usage: web3gate store copy --from sqlite:PATH (--to postgres:DSN | --config FILE)"

func (c *storeCopyCmd) Run(ctx context.Context, env Env) error {
	stdout, stderr := env.Stdout, env.Stderr
	from, to, cfgPath := &c.From, &c.To, &c.Config
	path, ok := strings.CutPrefix(*from, "sqlite:")
	if !ok || path == "" {
		return usageError{fmt.Errorf("store copy: --from must be sqlite:PATH\n%s", storeCopyUsage)}
	}
	var target store.Config
	switch {
	case *to != "" && *cfgPath != "":
		return usageError{fmt.Errorf("store copy: give --to or --config, not both\n%s", storeCopyUsage)}
	case *to != "":
		// postgres:DSN, or a postgres:// URL as it is.
		dsn, ok := *to, strings.HasPrefix(*to, "postgres://") || strings.HasPrefix(*to, "postgresql://")
		if !ok {
			dsn, ok = strings.CutPrefix(*to, "postgres:")
		}
		if !ok || dsn == "" {
			return usageError{fmt.Errorf("store copy: --to must be postgres:DSN\n%s", storeCopyUsage)}
		}
		target = store.Config{Driver: store.DriverPostgres, DSN: dsn}
		target.SetDefaults()
	case *cfgPath != "":
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		if cfg.Store.Driver != store.DriverPostgres {
			return fmt.Errorf("store copy: the store of %s is %s, not postgres", *cfgPath, cfg.Store.Driver)
		}
		target = cfg.Store
	default:
		return usageError{fmt.Errorf("store copy: give the target, --to postgres:DSN or --config FILE\n%s", storeCopyUsage)}
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store copy: source: %w", err)
	}
	log, err := app.NewLogger("warn", "", stderr)
	if err != nil {
		return err
	}
	// The source is read as it is: never migrated (a source at another schema version than
	// this binary's is refused).
	source := store.Config{Driver: store.DriverSQLite, Path: path, Migrate: store.MigrateNever}
	source.SetDefaults()
	src, err := store.Open(ctx, source, store.Deps{Logger: log.Named("store")})
	if err != nil {
		return fmt.Errorf("store copy: source: %w", err)
	}
	defer src.Close()
	dst, err := store.Open(ctx, target, store.Deps{Logger: log.Named("store")})
	if err != nil {
		return fmt.Errorf("store copy: target: %w", err)
	}
	defer dst.Close()
	counts, err := store.Copy(ctx, src, dst)
	if err != nil {
		return err
	}
	var total int64
	for _, c := range counts {
		fmt.Fprintf(stdout, "%-20s %d\n", c.Table, c.Rows)
		total += c.Rows
	}
	fmt.Fprintf(stdout, "store copy: %d rows in %d tables copied from %s\n", total, len(counts), path)
	return nil
}
