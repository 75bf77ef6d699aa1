package cli

import (
	"context"
	"fmt"
)

// versionCmd prints the build's version: `web3gate version`.
func versionCmd(_ context.Context, env Env, _ []string) error {
	fmt.Fprintln(env.Stdout, "web3gate", env.Version)
	return nil
}
