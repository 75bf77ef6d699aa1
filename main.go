// Command web3gate is a self-hosted wallet gateway for EVM chains: JSON-RPC to pools of
// upstream nodes, signing for the accounts it holds, and REST lookups, in one binary.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/config"
	"github.com/web3gate/web3gate/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "v0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "web3gate:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError is a command line that could not be understood: exit code 2.
type usageError struct{ error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "serve":
			return serveCmd(ctx, args[1:], stderr)
		case "config":
			if len(args) > 1 && args[1] == "check" {
				return configCheckCmd(args[2:], stdout, stderr)
			}
			return usageError{errors.New("usage: web3gate config check [--config FILE]")}
		case "auth":
			if len(args) > 1 && args[1] == "hash-token" {
				return hashTokenCmd(stdin, stdout)
			}
			return usageError{errors.New("usage: web3gate auth hash-token < token")}
		case "accounts":
			return accountsCmd(ctx, args[1:], stdin, stdout, stderr)
		case "clients":
			return clientsCmd(ctx, args[1:], stdout, stderr)
		case "products":
			return productsCmd(ctx, args[1:], stdin, stdout, stderr)
		case "store":
			return storeCmd(ctx, args[1:], stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, "web3gate", version)
			return nil
		default:
			return usageError{fmt.Errorf("unknown command %q (commands: serve, config check, auth hash-token, accounts, clients, products, store, version)", args[0])}
		}
	}
	return serveCmd(ctx, args, stderr)
}

func serveCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("web3gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	listen := fs.String("listen", "", "address of the public API (overrides server.listen)")
	adminListen := fs.String("admin-listen", "", "address of the admin listener (overrides admin.listen)")
	if err := fs.Parse(args); err != nil {
		return usageErrorOf(err)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *adminListen != "" {
		cfg.Admin.Listen = *adminListen
	}
	return run(ctx, cfg, stderr, nil)
}

func configCheckCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("web3gate config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	if err := fs.Parse(args); err != nil {
		return usageErrorOf(err)
	}
	if _, err := loadConfig(*cfgPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok\n", *cfgPath)
	return nil
}

// hashTokenCmd prints the SHA-256 of the token read from stdin, for auth.tokens[].sha256.
func hashTokenCmd(stdin io.Reader, stdout io.Writer) error {
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimRight(line, "\r\n")
	if tok == "" {
		return usageError{errors.New("auth hash-token: give the token on standard input")}
	}
	h := sha256.Sum256([]byte(tok))
	fmt.Fprintln(stdout, hex.EncodeToString(h[:]))
	return nil
}

func usageErrorOf(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}

// openStore loads the config at path and opens its store, for the commands that work on the
// store beside a running server or without one; their log (warnings and errors) goes to
// stderr.
func openStore(ctx context.Context, path string, stderr io.Writer) (*config.Config, *store.DB, *zap.Logger, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, nil, err
	}
	log, err := newLogger("warn", cfg.Cluster.ReplicaID, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := store.Open(ctx, cfg.Store, store.Deps{Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, db, log, nil
}
