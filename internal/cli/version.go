package cli

import (
	"context"
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/web3gate/web3gate/internal/buildinfo"
)

// versionLine is the build's version and revision, as `web3gate version` and
// `web3gate --version` print them. It is the one place that looks them up.
func versionLine(env Env) string {
	info := buildinfo.Read()
	if env.Version != "" {
		info.Version = env.Version
	}
	return "web3gate " + info.String()
}

// versionCmd prints the build's version: `web3gate version`.
type versionCmd struct{}

func (versionCmd) Run(_ context.Context, env Env) error {
	fmt.Fprintln(env.Stdout, versionLine(env))
	return nil
}

// versionFlag is --version: it prints the version and exits 0, whatever else is given.
type versionFlag bool

func (versionFlag) IgnoreDefault() {}

func (versionFlag) BeforeReset(ctx *kong.Context, env Env) error {
	fmt.Fprintln(env.Stdout, versionLine(env))
	ctx.Kong.Exit(0)
	return nil
}
