package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/web3gate/web3gate/middleware/auth"
	"github.com/web3gate/web3gate/store"
)

// clientsCmd manages the OAuth2 clients of the client-credentials grant.
type clientsCmd struct {
	New     clientsNewCmd     `cmd:"" help:"Create a client; its secret is printed once, only its argon2id hash is stored."`
	List    clientsListCmd    `cmd:"" help:"List the clients: id, principal, scopes, created, disabled (never a secret)."`
	Disable clientsDisableCmd `cmd:"" help:"Disable a client: no new tokens, and its tokens are refused within auth.oauth.revocationCheckInterval."`
	Enable  clientsEnableCmd  `cmd:"" help:"Enable a disabled client."`
}

// clientsNewCmd creates a client. The secret is printed once; only its argon2id hash is
// stored.
type clientsNewCmd struct {
	configFlag
	Principal string `placeholder:"PRINCIPAL" help:"The principal the client's tokens act for (required)."`
	Scope     string `default:"${scopeSign}" help:"Space-separated scopes the client may request."`
}

func (c *clientsNewCmd) Run(ctx context.Context, env Env) error {
	if strings.TrimSpace(c.Principal) == "" {
		return usageError{errors.New("clients new: --principal is required")}
	}
	ctx, s, done, err := openStore(ctx, c.Config, env.Stderr, time.Minute)
	if err != nil {
		return err
	}
	defer done()
	id, secret, err := auth.CreateClient(ctx, s.db, c.Principal, strings.Fields(c.Scope))
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; web3gate stores its hash)\n", id, secret)
	return nil
}

// clientsListCmd lists the clients of the store, oldest first.
type clientsListCmd struct {
	configFlag
	Principal string `placeholder:"PRINCIPAL" help:"Only the clients of this principal."`
}

func (c *clientsListCmd) Run(ctx context.Context, env Env) error {
	ctx, s, done, err := openStore(ctx, c.Config, env.Stderr, time.Minute)
	if err != nil {
		return err
	}
	defer done()
	clients, err := s.db.Clients(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT ID\tPRINCIPAL\tSCOPES\tCREATED\tDISABLED")
	for _, cl := range clients {
		if c.Principal != "" && cl.Principal != c.Principal {
			continue
		}
		disabled := "-"
		if cl.DisabledAt != nil {
			disabled = cl.DisabledAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cl.ID, cl.Principal, strings.Join(cl.Scopes, " "), cl.CreatedAt.UTC().Format(time.RFC3339), disabled)
	}
	return tw.Flush()
}

// clientStateArgs are the arguments of clients disable and enable.
type clientStateArgs struct {
	configFlag
	ID string `arg:"" name:"CLIENT_ID" help:"The client's id."`
}

type clientsDisableCmd struct{ clientStateArgs }

func (c *clientsDisableCmd) Run(ctx context.Context, env Env) error {
	return setClientState(ctx, env, "disable", c.clientStateArgs)
}

type clientsEnableCmd struct{ clientStateArgs }

func (c *clientsEnableCmd) Run(ctx context.Context, env Env) error {
	return setClientState(ctx, env, "enable", c.clientStateArgs)
}

// setClientState disables or enables a client in the store. A disabled client gets no new
// tokens, and the servers sharing the store refuse the tokens it holds within
// auth.oauth.revocationCheckInterval. It can run next to a running server.
func setClientState(ctx context.Context, env Env, action string, a clientStateArgs) error {
	if a.ID == "" {
		return usageError{fmt.Errorf("clients %s: give exactly one client id", action)}
	}
	ctx, s, done, err := openStore(ctx, a.Config, env.Stderr, time.Minute)
	if err != nil {
		return err
	}
	defer done()
	var c store.Client
	if action == "disable" {
		c, err = s.db.DisableClient(ctx, a.ID, time.Now())
	} else {
		c, err = s.db.EnableClient(ctx, a.ID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("clients %s: no client with id %q", action, a.ID)
	}
	if err != nil {
		return err
	}
	if c.DisabledAt != nil {
		fmt.Fprintf(env.Stdout, "client %s (principal %s) disabled since %s; its tokens are refused within %s\n",
			c.ID, c.Principal, c.DisabledAt.UTC().Format(time.RFC3339), s.cfg.Auth.OAuth.RevocationCheckInterval)
		return nil
	}
	fmt.Fprintf(env.Stdout, "client %s (principal %s) enabled\n", c.ID, c.Principal)
	return nil
}
