package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/internal/app"
)

// serveCmd runs the server until ctx ends (SIGINT or SIGTERM): `web3gate [serve] [flags]`.
func serveCmd(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("web3gate", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	listen := fs.String("listen", "", "address of the public API (overrides server.listen)")
	adminListen := fs.String("admin-listen", "", "address of the admin listener (overrides admin.listen)")
	if err := fs.Parse(args); err != nil {
		return usageErrorOf(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *adminListen != "" {
		cfg.Admin.Listen = *adminListen
	}
	return app.Run(ctx, cfg, app.Options{Version: env.Version, Log: env.Stderr})
}
