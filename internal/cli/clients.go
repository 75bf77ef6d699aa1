package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/store"
)

const clientsUsage = `usage:
  web3gate clients new --principal PRINCIPAL [--scope eth_sign] [--config FILE]
  web3gate clients disable CLIENT_ID [--config FILE]
  web3gate clients enable CLIENT_ID [--config FILE]`

// clientsCmd creates OAuth2 clients of the client-credentials grant, and disables and
// enables them.
func clientsCmd(ctx context.Context, env Env, args []string) error {
	stdout, stderr := env.Stdout, env.Stderr
	if len(args) == 0 {
		return usageError{errors.New(clientsUsage)}
	}
	switch args[0] {
	case "new":
		return clientsNewCmd(ctx, args[1:], stdout, stderr)
	case "disable", "enable":
		return clientsStateCmd(ctx, args[0], args[1:], stdout, stderr)
	}
	return usageError{errors.New(clientsUsage)}
}

// clientsNewCmd creates a client. The secret is printed once; only its argon2id hash is
// stored.
func clientsNewCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("web3gate clients new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	principal := fs.String("principal", "", "the principal the client's tokens act for")
	scope := fs.String("scope", auth.ScopeSign, "space-separated scopes the client may request")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return usageErrorOf(err)
	}
	if strings.TrimSpace(*principal) == "" || len(positional) != 0 {
		return usageError{fmt.Errorf("clients new: --principal is required and takes no arguments\n%s", clientsUsage)}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, db, _, err := openStore(ctx, *cfgPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	id, secret, err := auth.CreateClient(ctx, db, *principal, strings.Fields(*scope))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; web3gate stores its hash)\n", id, secret)
	return nil
}

// clientsStateCmd disables or enables a client in the store. A disabled client gets no new
// tokens, and the servers sharing the store refuse the tokens it holds within
// auth.oauth.revocationCheckInterval. It can run next to a running server.
func clientsStateCmd(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("web3gate clients "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return usageErrorOf(err)
	}
	if len(positional) != 1 || positional[0] == "" {
		return usageError{fmt.Errorf("clients %s: give exactly one client id\n%s", action, clientsUsage)}
	}
	id := positional[0]
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg, db, _, err := openStore(ctx, *cfgPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	var c store.Client
	if action == "disable" {
		c, err = db.DisableClient(ctx, id, time.Now())
	} else {
		c, err = db.EnableClient(ctx, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("clients %s: no client with id %q", action, id)
	}
	if err != nil {
		return err
	}
	if c.DisabledAt != nil {
		fmt.Fprintf(stdout, "client %s (principal %s) disabled since %s; its tokens are refused within %s\n",
			c.ID, c.Principal, c.DisabledAt.UTC().Format(time.RFC3339), cfg.Auth.OAuth.RevocationCheckInterval)
		return nil
	}
	fmt.Fprintf(stdout, "client %s (principal %s) enabled\n", c.ID, c.Principal)
	return nil
}
