package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// ImportPassphraseEnv holds the passphrase of a key file being imported, when
// --passphrase-file is not given.
const ImportPassphraseEnv = "WEB3GATE_IMPORT_PASSPHRASE"

const accountsUsage = `usage:
  web3gate accounts new --owner PRINCIPAL [--config FILE]
  web3gate accounts import --owner PRINCIPAL [--passphrase-file F] [--config FILE] KEYFILE
  web3gate accounts list [--owner PRINCIPAL] [--config FILE]`

// accountsCmd manages the accounts the service holds: keys in the keystore, owners in the
// store. The keystore passphrase comes from wallet.keys (env var or file), never a flag.
func accountsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New(accountsUsage)}
	}
	sub := args[0]
	fs := flag.NewFlagSet("web3gate accounts "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	owner := fs.String("owner", "", "the principal the account belongs to")
	passFile := fs.String("passphrase-file", "", "file holding the passphrase of the key file to import (else $"+ImportPassphraseEnv+")")
	positional, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return usageErrorOf(err)
	}
	switch sub {
	case "new", "import":
		if strings.TrimSpace(*owner) == "" {
			return usageError{fmt.Errorf("accounts %s: --owner is required\n%s", sub, accountsUsage)}
		}
	case "list":
	default:
		return usageError{fmt.Errorf("unknown accounts command %q\n%s", sub, accountsUsage)}
	}
	if want := map[string]int{"new": 0, "import": 1, "list": 0}[sub]; len(positional) != want {
		return usageError{fmt.Errorf("accounts %s: wrong number of arguments\n%s", sub, accountsUsage)}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cfg, db, log, err := openStore(ctx, *cfgPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()

	if sub == "list" {
		accs, err := db.AllAccounts(ctx)
		if *owner != "" {
			accs, err = db.AccountsOf(ctx, *owner)
		}
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tOWNER\tSOURCE\tCREATED")
		for _, a := range accs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Address.Hex(), a.Owner, a.Source, a.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	}

	keys, err := wallet.OpenKeys(cfg.Wallet.Keys, wallet.Deps{Logger: log})
	if err != nil {
		return err
	}
	accounts := wallet.NewAccounts(keys, db)
	switch sub {
	case "new":
		addr, err := accounts.Create(ctx, *owner)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, addr.Hex())
	case "import":
		keyJSON, err := os.ReadFile(positional[0])
		if err != nil {
			return fmt.Errorf("read key file: %w", err)
		}
		pass, err := importPassphrase(*passFile)
		if err != nil {
			return err
		}
		addr, err := accounts.Import(ctx, *owner, keyJSON, pass)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, addr.Hex())
	}
	log.Debug("accounts command done", zap.String("command", sub))
	return nil
}

// importPassphrase reads the key file's passphrase from file (first line) or the environment.
func importPassphrase(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read passphrase file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimSuffix(line, "\r"), nil
	}
	if v, ok := os.LookupEnv(ImportPassphraseEnv); ok {
		return v, nil
	}
	return "", usageError{fmt.Errorf("accounts import: give the key file's passphrase with --passphrase-file or $%s", ImportPassphraseEnv)}
}

// parseInterspersed parses flags that may come before or after the positional arguments
// (`accounts import KEYFILE --owner alice`), and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
