// Package cli is web3gate's command line: one file per subcommand, each with its own flags
// and usage. main hands it the arguments and exits with the code it returns.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Env is what a command runs with besides its arguments.
type Env struct {
	// Version is the build's version (main's, set with -ldflags).
	Version        string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// command is one subcommand: its name on the command line (words separated by a space for
// a command of a group, as "config check") and what runs it with the arguments after the
// name.
type command struct {
	name  string
	usage string // of a command of a group: the answer to the group's name alone
	run   func(ctx context.Context, env Env, args []string) error
}

// commands are the subcommands; a command line without one (or starting with a flag)
// runs serve.
func commands() []command {
	return []command{
		{"serve", "", serveCmd},
		{"config check", "usage: web3gate config check [--config FILE]", configCheckCmd},
		{"auth hash-token", "usage: web3gate auth hash-token < token", hashTokenCmd},
		{"accounts", "", accountsCmd},
		{"clients", "", clientsCmd},
		{"products", "", productsCmd},
		{"store", "", storeCmd},
		{"version", "", versionCmd},
	}
}

// Main runs the command line args and returns the process's exit code: 0, 1 for a command
// that failed, 2 for a command line that could not be understood (and for --help). The
// error is written to env.Stderr.
func Main(ctx context.Context, env Env, args []string) int {
	err := Run(ctx, env, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(env.Stderr, "web3gate:", err)
	}
	return ExitCode(err)
}

// Run runs the command line args.
func Run(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return serveCmd(ctx, env, args)
	}
	var names []string
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c.run(ctx, env, args[len(words):])
		}
		if words[0] == args[0] {
			return usageError{errors.New(c.usage)}
		}
		names = append(names, c.name)
	}
	return usageError{fmt.Errorf("unknown command %q (commands: %s)", args[0], strings.Join(names, ", "))}
}

// usageError is a command line that could not be understood: exit code 2.
type usageError struct{ error }

// ExitCode is the exit code of a command that returned err.
func ExitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u) || errors.Is(err, flag.ErrHelp):
		return 2
	}
	return 1
}

func usageErrorOf(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}
