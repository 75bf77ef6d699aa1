// Command web3gate is a self-hosted wallet gateway for EVM chains: JSON-RPC to pools of
// upstream nodes, signing for the accounts it holds, and REST lookups, in one binary.
// The program is a library: the command line is internal/cli, the server internal/app.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/web3gate/web3gate/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	code := cli.Main(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}
