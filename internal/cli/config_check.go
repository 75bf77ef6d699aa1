package cli

import (
	"context"
	"fmt"

	"github.com/web3gate/web3gate/config"
)

// configCheckCmd loads and validates a configuration file without starting anything:
// `web3gate config check [--config FILE]`.
type configCheckCmd struct{ configFlag }

func (c *configCheckCmd) Run(_ context.Context, env Env) error {
	if _, err := c.load(); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: ok\n", c.Config)
	return nil
}

// configPrintCmd prints the effective configuration, every default applied and every
// secret masked: `web3gate config print [--config FILE]`.
type configPrintCmd struct{ configFlag }

func (c *configPrintCmd) Run(_ context.Context, env Env) error {
	cfg, err := c.load()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "# the effective configuration of %s: defaults applied, environment expanded, secrets masked (%s)\n", c.Config, config.Masked)
	return config.Print(cfg, env.Stdout)
}
