package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/web3gate/web3gate/config"
)

// configCheckCmd loads and validates a configuration file without starting anything:
// `web3gate config check [--config FILE]`.
func configCheckCmd(_ context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("web3gate config check", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return usageErrorOf(err)
	}
	if _, err := config.Load(*cfgPath); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: ok\n", *cfgPath)
	return nil
}
