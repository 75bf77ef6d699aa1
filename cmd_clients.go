package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/web3gate/web3gate/middleware/auth"
)

const clientsUsage = `usage:
  web3gate clients new --principal PRINCIPAL [--scope eth_sign] [--config FILE]`

// clientsCmd creates OAuth2 clients of the client-credentials grant. The secret is printed
// once; only its argon2id hash is stored.
func clientsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		return usageError{errors.New(clientsUsage)}
	}
	fs := flag.NewFlagSet("web3gate clients new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	principal := fs.String("principal", "", "the principal the client's tokens act for")
	scope := fs.String("scope", auth.ScopeSign, "space-separated scopes the client may request")
	positional, err := parseInterspersed(fs, args[1:])
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
