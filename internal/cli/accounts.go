package cli

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/wallet"
)

// ImportPassphraseEnv holds the passphrase of a key file being imported, when
// --passphrase-file is not given.
const ImportPassphraseEnv = "WEB3GATE_IMPORT_PASSPHRASE"

const accountsUsage = `usage:
  web3gate accounts new --owner PRINCIPAL [--config FILE]
  web3gate accounts import --owner PRINCIPAL [--passphrase-file F] [--config FILE] KEYFILE
  web3gate accounts import --owner PRINCIPAL --private-key-file F|- [--config FILE]
  web3gate accounts import --owner PRINCIPAL --private-key-stdin [--config FILE]
  web3gate accounts list [--owner PRINCIPAL] [--config FILE]
  web3gate accounts export-keystore --dir DIR [--config FILE]
  web3gate accounts import-keystore --dir DIR [--config FILE]
KEYFILE is a V3 keystore file (geth, cast, ethers, ...), decrypted with its own passphrase
(--passphrase-file or $` + ImportPassphraseEnv + `). A raw private key (64 hex digits) comes from a
file only you can read, or from standard input; never from the command line.
export-keystore copies every key of the configured key backend (wallet.keys.backend) into DIR,
an empty or new keystore directory; import-keystore copies the key files of DIR into the
configured backend. Keys are copied as they are, encrypted with the keystore passphrase, each
checked to decrypt with it first: the way between the keystore directory and the store.`

// accountsFlags are the flags of the accounts commands.
type accountsFlags struct {
	cfgPath, owner, passFile, keyFile, dir string
	keyStdin                               bool
}

// rawKey reports whether a raw private key is imported (not a key file).
func (f *accountsFlags) rawKey() bool { return f.keyFile != "" || f.keyStdin }

// accountsCmd manages the accounts the service holds: keys in the keystore, owners in the
// store. The keystore passphrase comes from wallet.keys (env var or file), never a flag.
func accountsCmd(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 {
		return usageError{errors.New(accountsUsage)}
	}
	sub := args[0]
	if err := refuseKeyInArgs(args[1:]); err != nil {
		return usageError{fmt.Errorf("accounts %s: %w", sub, err)}
	}
	var f accountsFlags
	fs := flag.NewFlagSet("web3gate accounts "+sub, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.StringVar(&f.cfgPath, "config", "config.yaml", "configuration file")
	fs.StringVar(&f.owner, "owner", "", "the principal the account belongs to")
	fs.StringVar(&f.passFile, "passphrase-file", "", "file holding the passphrase of the KEYFILE to import (else $"+ImportPassphraseEnv+")")
	fs.StringVar(&f.keyFile, "private-key-file", "", "file holding a raw hex private key to import (mode 0600 or 0400; - for standard input)")
	fs.BoolVar(&f.keyStdin, "private-key-stdin", false, "read a raw hex private key to import from standard input")
	fs.StringVar(&f.dir, "dir", "", "the keystore directory to export into or import from")
	positional, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return usageErrorOf(err)
	}
	if err := checkAccountsArgs(sub, &f, positional); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cfg, db, log, err := openStore(ctx, f.cfgPath, env.Stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "list":
		return listAccounts(ctx, db, f.owner, env.Stdout)
	case "export-keystore", "import-keystore":
		return copyKeystoreCmd(ctx, sub, cfg.Wallet.Keys, f.dir, wallet.Deps{Logger: log, Store: db}, env.Stdout)
	}
	// The key to import is read (and a key file decrypted with its own passphrase) before the
	// keystore is unlocked: a wrong file or passphrase is told at once, and apart from a
	// wrong keystore passphrase, which comes from unlocking it.
	var priv *ecdsa.PrivateKey
	switch {
	case sub != "import":
	case f.rawKey():
		priv, err = readRawKey(f.keyFile, env.Stdin)
	default:
		priv, err = readKeyFile(positional[0], f.passFile)
	}
	if err != nil {
		return err
	}
	keys, err := wallet.OpenKeys(cfg.Wallet.Keys, wallet.Deps{Logger: log, Store: db})
	if err != nil {
		return err
	}
	accounts := wallet.NewAccounts(keys, db)
	var addr common.Address
	if sub == "new" {
		addr, err = accounts.Create(ctx, f.owner)
	} else {
		addr, err = accounts.ImportKey(ctx, f.owner, priv)
	}
	if errors.Is(err, wallet.ErrKeyExists) {
		return fmt.Errorf("accounts %s: %w: %s is already held for %s", sub, err, addr.Hex(), f.owner)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, addr.Hex())
	log.Debug("accounts command done", zap.String("command", sub))
	return nil
}

// checkAccountsArgs refuses a command line whose flags and arguments do not fit the accounts
// command sub.
func checkAccountsArgs(sub string, f *accountsFlags, positional []string) error {
	switch sub {
	case "new", "import":
		if strings.TrimSpace(f.owner) == "" {
			return usageError{fmt.Errorf("accounts %s: --owner is required\n%s", sub, accountsUsage)}
		}
	case "list":
	case "export-keystore", "import-keystore":
		if f.dir == "" {
			return usageError{fmt.Errorf("accounts %s: --dir is required\n%s", sub, accountsUsage)}
		}
	default:
		return usageError{fmt.Errorf("unknown accounts command %q\n%s", sub, accountsUsage)}
	}
	rawKey := f.rawKey()
	switch {
	case rawKey && sub != "import":
		return usageError{fmt.Errorf("accounts %s: --private-key-file and --private-key-stdin are flags of accounts import\n%s", sub, accountsUsage)}
	case f.keyFile != "" && f.keyStdin:
		return usageError{fmt.Errorf("accounts import: give --private-key-file or --private-key-stdin, not both\n%s", accountsUsage)}
	case rawKey && len(positional) > 0:
		return usageError{fmt.Errorf("accounts import: give either a KEYFILE or a raw private key (--private-key-file, --private-key-stdin), not both\n%s", accountsUsage)}
	case rawKey && f.passFile != "":
		return usageError{fmt.Errorf("accounts import: --passphrase-file is the passphrase of a KEYFILE; a raw private key has none\n%s", accountsUsage)}
	}
	if f.dir != "" && sub != "export-keystore" && sub != "import-keystore" {
		return usageError{fmt.Errorf("accounts %s: --dir is a flag of accounts export-keystore and import-keystore\n%s", sub, accountsUsage)}
	}
	want := map[string]int{"import": 1}[sub]
	if rawKey {
		want = 0
	}
	if len(positional) != want {
		return usageError{fmt.Errorf("accounts %s: wrong number of arguments\n%s", sub, accountsUsage)}
	}
	return nil
}

// listAccounts prints the accounts of owner (all of them when empty).
func listAccounts(ctx context.Context, db *store.DB, owner string, stdout io.Writer) error {
	accs, err := db.AllAccounts(ctx)
	if owner != "" {
		accs, err = db.AccountsOf(ctx, owner)
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

// copyKeystoreCmd copies the keys of the configured backend into dir (export-keystore) or
// those of dir into the configured backend (import-keystore).
func copyKeystoreCmd(ctx context.Context, sub string, cfg wallet.KeysConfig, dir string, deps wallet.Deps, stdout io.Writer) error {
	other := cfg
	other.Backend, other.Dir = wallet.KeysBackendDir, dir
	from, to := cfg, other
	if sub == "import-keystore" {
		from, to = other, cfg
		if st, err := os.Stat(dir); err != nil {
			return fmt.Errorf("accounts import-keystore: %w", err)
		} else if !st.IsDir() {
			return fmt.Errorf("accounts import-keystore: %s is not a directory", dir)
		}
	}
	res, err := wallet.CopyKeys(ctx, from, to, deps)
	if err != nil {
		return fmt.Errorf("accounts %s: %w", sub, err)
	}
	fmt.Fprintf(stdout, "%d keys copied, %d already present\n", res.Copied, res.Present)
	return nil
}

// readRawKey reads a raw hex private key from the file at path, or from stdin when path is
// "" or "-".
func readRawKey(path string, stdin io.Reader) (*ecdsa.PrivateKey, error) {
	if path == "" || path == "-" {
		key, err := wallet.ReadPrivateKey(stdin)
		if err != nil {
			return nil, fmt.Errorf("accounts import: private key from standard input: %w", err)
		}
		return key, nil
	}
	key, err := wallet.ReadPrivateKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("accounts import: %w", err)
	}
	return key, nil
}

// readKeyFile reads the V3 key file at path and decrypts it with its own passphrase (from
// passFile, else $WEB3GATE_IMPORT_PASSPHRASE).
func readKeyFile(path, passFile string) (*ecdsa.PrivateKey, error) {
	keyJSON, err := wallet.ReadKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("accounts import: %w", err)
	}
	defer clear(keyJSON)
	if wallet.LooksLikePrivateKey(string(keyJSON)) {
		return nil, usageError{fmt.Errorf("accounts import: %s holds a raw hex private key, not a key file: "+
			"import it with --private-key-file %s", path, path)}
	}
	pass, from, err := importPassphrase(passFile)
	if err != nil {
		return nil, err
	}
	key, err := wallet.DecryptKeyFile(keyJSON, pass)
	if errors.Is(err, wallet.ErrFilePassphrase) {
		return nil, fmt.Errorf("accounts import: %s: %w, read from %s", path, wallet.ErrFilePassphrase, from)
	}
	if err != nil {
		return nil, fmt.Errorf("accounts import: %s: %w", path, err)
	}
	return key, nil
}

// importPassphrase returns the key file's passphrase, from file (first line) or the
// environment, and where it came from (for errors; never the value).
func importPassphrase(file string) (pass, from string, err error) {
	if file != "" {
		pass, err := wallet.ReadImportPassphrase(file)
		if err != nil {
			return "", "", fmt.Errorf("accounts import: %w", err)
		}
		return pass, "--passphrase-file " + file, nil
	}
	if v, ok := os.LookupEnv(ImportPassphraseEnv); ok {
		return v, "$" + ImportPassphraseEnv, nil
	}
	return "", "", usageError{fmt.Errorf("accounts import: give the key file's passphrase with --passphrase-file or $%s", ImportPassphraseEnv)}
}

// refuseKeyInArgs refuses a command line that carries a private key: one there is readable by
// every user of the machine (ps, /proc/PID/cmdline) and kept in the shell's history. It
// checks every argument, and the value of every --flag=value, without quoting any.
func refuseKeyInArgs(args []string) error {
	const how = "give a key with --private-key-file F (a file only you can read) or --private-key-stdin"
	for _, a := range args {
		value := a
		if strings.HasPrefix(a, "-") {
			name, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "private-key" {
				return fmt.Errorf("there is no --private-key flag: a key on the command line can be read "+
					"by other users (ps, /proc) and stays in the shell history; %s", how)
			}
			value = v
		}
		if wallet.LooksLikePrivateKey(value) {
			return fmt.Errorf("an argument looks like a private key (64 hex digits) and is refused: "+
				"a key on the command line can be read by other users (ps, /proc) and stays in the "+
				"shell history, so consider this one exposed; %s (a KEYFILE named by 64 hex digits: "+
				"write it as ./NAME)", how)
		}
	}
	return nil
}
