package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
	"github.com/web3gate/web3gate/store"
)

const storeUsage = `usage:
  web3gate store migrate [--config FILE]
  web3gate store copy --from sqlite:PATH (--to postgres:DSN | --config FILE)`

// storeCmd applies the store's migrations, or copies a SQLite store into PostgreSQL.
func storeCmd(ctx context.Context, env Env, args []string) error {
	stdout, stderr := env.Stdout, env.Stderr
	if len(args) == 0 {
		return usageError{errors.New(storeUsage)}
	}
	switch args[0] {
	case "migrate":
		return storeMigrateCmd(ctx, args[1:], stdout, stderr)
	case "copy":
		return storeCopyCmd(ctx, args[1:], stdout, stderr)
	}
	return usageError{errors.New(storeUsage)}
}

// storeMigrateCmd applies the pending migrations of the configured store and exits, whatever
// store.migrate says: for operators who keep replicas from migrating at start
// (store.migrate: never).
func storeMigrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("web3gate store migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return usageErrorOf(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), storeUsage)}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log, err := app.NewLogger("info", cfg.Cluster.ReplicaID, stderr)
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
func storeCopyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("web3gate store copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the source: sqlite:PATH")
	to := fs.String("to", "", "the target: postgres:DSN, DSN a postgres:// URL or key=value pairs (or give --config, whose store section is the target)")
	cfgPath := fs.String("config", "", "a configuration file whose store section (driver postgres) is the target")
	if err := fs.Parse(args); err != nil {
		return usageErrorOf(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), storeUsage)}
	}
	path, ok := strings.CutPrefix(*from, "sqlite:")
	if !ok || path == "" {
		return usageError{fmt.Errorf("store copy: --from must be sqlite:PATH\n%s", storeUsage)}
	}
	var target store.Config
	switch {
	case *to != "" && *cfgPath != "":
		return usageError{fmt.Errorf("store copy: give --to or --config, not both\n%s", storeUsage)}
	case *to != "":
		// postgres:DSN, or a postgres:// URL as it is.
		dsn, ok := *to, strings.HasPrefix(*to, "postgres://") || strings.HasPrefix(*to, "postgresql://")
		if !ok {
			dsn, ok = strings.CutPrefix(*to, "postgres:")
		}
		if !ok || dsn == "" {
			return usageError{fmt.Errorf("store copy: --to must be postgres:DSN\n%s", storeUsage)}
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
		return usageError{fmt.Errorf("store copy: give the target, --to postgres:DSN or --config FILE\n%s", storeUsage)}
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
