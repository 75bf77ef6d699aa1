package cli

import (
	"context"

	"github.com/web3gate/web3gate/internal/app"
)

// serveCmd runs the server until ctx ends (SIGINT or SIGTERM): `web3gate [serve] [flags]`.
type serveCmd struct {
	configFlag
	Listen      string `placeholder:"HOST:PORT" help:"Address of the public API (overrides server.listen)."`
	AdminListen string `name:"admin-listen" placeholder:"HOST:PORT" help:"Address of the admin listener (overrides admin.listen)."`
}

func (c *serveCmd) Run(ctx context.Context, env Env) error {
	cfg, err := c.load()
	if err != nil {
		return err
	}
	if c.Listen != "" {
		cfg.Server.Listen = c.Listen
	}
	if c.AdminListen != "" {
		cfg.Admin.Listen = c.AdminListen
	}
	return app.Run(ctx, cfg, app.Options{Version: env.Version, Log: env.Stderr})
}
