// Package cli is web3gate's command line: one file per subcommand, each a struct whose
// fields are its flags and arguments (parsed by kong), with its own --help. main hands it
// the arguments and exits with the code it returns.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/middleware/auth"
)

// Env is what a command runs with besides its arguments.
type Env struct {
	// Version is the build's version (main's, set with -ldflags).
	Version        string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ConfigEnv names the configuration file when --config is not given.
const ConfigEnv = "WEB3GATE_CONFIG"

// commandLine is the whole command line: the subcommands and the flags of the root. A
// command line without a subcommand runs serve, with serve's flags.
type commandLine struct {
	Version versionFlag `name:"version" help:"Print the version and revision, and exit."`

	Serve       serveCmd       `cmd:"" default:"withargs" help:"Run the server until SIGINT or SIGTERM (the command when none is given)."`
	Healthcheck healthcheckCmd `cmd:"" help:"GET the admin listener's /healthz (or /readyz) and exit 0 when it answers 200, else 1."`
	Config      struct {
		Check configCheckCmd `cmd:"" help:"Load and validate a configuration file without starting anything."`
		Print configPrintCmd `cmd:"" help:"Print the effective configuration (defaults applied) as YAML, secrets masked."`
	} `cmd:"" help:"Check or print a configuration file."`
	Auth struct {
		HashToken hashTokenCmd `cmd:"" name:"hash-token" help:"Print the SHA-256 of the token read from standard input, for the config's token lists."`
	} `cmd:"" help:"Bearer tokens."`
	Accounts accountsCmd `cmd:"" help:"The accounts the service holds: create, import, list, move between keystore and store."`
	Clients  clientsCmd  `cmd:"" help:"OAuth2 clients of the client-credentials grant: create, list, disable, enable."`
	Products struct {
		Import productsImportCmd `cmd:"" help:"Import a catalog file: every product validated, then all written in one store transaction, or none."`
	} `cmd:"" help:"The product catalog."`
	Store struct {
		Migrate storeMigrateCmd `cmd:"" help:"Apply the store's pending migrations and exit."`
		Copy    storeCopyCmd    `cmd:"" help:"Copy a SQLite store into an empty PostgreSQL database."`
	} `cmd:"" help:"The SQL store."`
	VersionCmd versionCmd `cmd:"" name:"version" help:"Print the version and revision."`
}

// configFlag is the --config flag of the commands that read the configuration file.
type configFlag struct {
	Config string `name:"config" default:"config.yaml" env:"WEB3GATE_CONFIG" placeholder:"FILE" help:"Configuration file (else $$${env}, else config.yaml)."`
}

// load loads the configuration file (config.yaml when $WEB3GATE_CONFIG is set but empty).
func (f *configFlag) load() (*config.Config, error) {
	if f.Config == "" {
		f.Config = "config.yaml"
	}
	return config.Load(f.Config)
}

// Main runs the command line args and returns the process's exit code: 0, 1 for a command
// that failed, 2 for a command line that could not be understood. The error is written to
// env.Stderr; --help and --version exit 0.
func Main(ctx context.Context, env Env, args []string) int {
	err := Run(ctx, env, args)
	if err != nil {
		fmt.Fprintln(env.Stderr, "web3gate:", err)
	}
	return ExitCode(err)
}

// exitRequest is kong asking to exit (after --help or --version), carried out of its parser
// by a panic so that nothing after the flag runs.
type exitRequest int

// Run runs the command line args.
func Run(ctx context.Context, env Env, args []string) (err error) {
	var cl commandLine
	parser, err := kong.New(&cl,
		kong.Name("web3gate"),
		kong.Description("web3gate: a self-hosted wallet gateway for EVM chains.\n\n"+
			"Without a command it runs serve: web3gate [--config FILE] [--listen HOST:PORT] [--admin-listen HOST:PORT]. "+
			"--config defaults to $"+ConfigEnv+", else config.yaml, for every command. "+
			"Exit codes: 0 done, 1 the command failed, 2 a command line that could not be understood."),
		kong.Writers(env.Stdout, env.Stderr),
		kong.Exit(func(code int) { panic(exitRequest(code)) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: false}),
		kong.Vars{"scopeSign": auth.ScopeSign, "importEnv": "$" + ImportPassphraseEnv},
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(env),
	)
	if err != nil {
		return err // a mistake in the command structs
	}
	defer func() {
		if p := recover(); p != nil {
			code, ok := p.(exitRequest)
			if !ok {
				panic(p)
			}
			if err = nil; code != 0 {
				err = usageError{fmt.Errorf("exit %d", code)}
			}
		}
	}()
	if err := checkCommandName(parser, args); err != nil {
		return err
	}
	if len(args) > 0 && args[0] == "accounts" {
		if err := refuseKeyInArgs(args[1:]); err != nil {
			return usageError{fmt.Errorf("accounts: %w", err)}
		}
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return usageError{usageOf(parser, err)}
	}
	return kctx.Run()
}

// checkCommandName refuses a first argument that is neither a flag nor a command: without
// it, kong would hand the word to serve, the default command, as an unexpected argument.
func checkCommandName(parser *kong.Kong, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return nil
	}
	var names []string
	for _, c := range parser.Model.Children {
		if c.Name == args[0] {
			return nil
		}
		names = append(names, c.Name)
	}
	return usageError{fmt.Errorf("unknown command %q (commands: %s; see web3gate --help)", args[0], strings.Join(names, ", "))}
}

// usageOf is err with the usage line of the command it is about, and where to read more.
func usageOf(parser *kong.Kong, err error) error {
	var pe *kong.ParseError
	if !errors.As(err, &pe) || pe.Context == nil {
		return err
	}
	node := pe.Context.Selected()
	if node == nil {
		node = parser.Model.Node
	}
	usage := strings.Join(strings.Fields(parser.Model.Name+" "+node.Summary()), " ")
	return fmt.Errorf("%w\nusage: %s\nsee `%s --help`", err, usage, node.FullPath())
}

// usageError is a command line that could not be understood: exit code 2.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// ExitCode is the exit code of a command that returned err.
func ExitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}
