package cli

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"errors"
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

// accountsCmd manages the accounts the service holds: keys in the keystore, owners in the
// store. The keystore passphrase comes from wallet.keys (env var or file), never a flag.
type accountsCmd struct {
	New            accountsNewCmd            `cmd:"" help:"Create an account: a new key, held for a principal."`
	Import         accountsImportCmd         `cmd:"" help:"Import a key: a V3 key file (geth, cast, ethers, ...) or a raw hex private key from a file or standard input."`
	List           accountsListCmd           `cmd:"" help:"List the accounts (of one owner)."`
	ExportKeystore accountsExportKeystoreCmd `cmd:"" name:"export-keystore" help:"Copy every key of the configured key backend into a keystore directory."`
	ImportKeystore accountsImportKeystoreCmd `cmd:"" name:"import-keystore" help:"Copy the key files of a keystore directory into the configured key backend."`
}

type accountsNewCmd struct {
	configFlag
	Owner   string `placeholder:"PRINCIPAL" help:"The principal the account belongs to (required)."`
	Backend string `default:"keystore" enum:"keystore,pkcs11,awskms" help:"Where the key is made and kept: keystore (encrypted, in wallet.keys), pkcs11 (generated on the token of wallet.pkcs11, non-extractable) or awskms (an ECC_SECG_P256K1 key in AWS KMS, wallet.awskms)."`
	Label   string `placeholder:"TEXT" help:"A label for the key in the HSM or KMS (pkcs11, awskms), for its operators."`
}

func (c *accountsNewCmd) Run(ctx context.Context, env Env) error {
	if strings.TrimSpace(c.Owner) == "" {
		return usageError{errors.New("accounts new: --owner is required")}
	}
	return addAccount(ctx, env, "new", c.Config, accountTarget{owner: c.Owner, backend: c.Backend, label: c.Label}, nil)
}

type accountsImportCmd struct {
	configFlag
	Owner           string `placeholder:"PRINCIPAL" help:"The principal the account belongs to (required)."`
	PassphraseFile  string `name:"passphrase-file" placeholder:"FILE" help:"File (or pipe) holding the passphrase of the KEYFILE, its first line (else ${importEnv})."`
	PrivateKeyFile  string `name:"private-key-file" placeholder:"FILE" help:"File holding a raw hex private key (mode 0600 or 0400; - for standard input)."`
	PrivateKeyStdin bool   `name:"private-key-stdin" help:"Read a raw hex private key from standard input."`
	KeyFile         string `arg:"" optional:"" name:"KEYFILE" help:"A V3 keystore file, decrypted with its own passphrase."`
	Backend         string `default:"keystore" enum:"keystore,pkcs11" help:"Where the key goes: keystore (encrypted with the keystore passphrase; the file is left as it is) or pkcs11 (onto the token of wallet.pkcs11, non-extractable; the KEYFILE or --private-key-file is then deleted)."`
	Label           string `placeholder:"TEXT" help:"A label for the key on the token (pkcs11)."`
}

func (c *accountsImportCmd) Help() string {
	return "KEYFILE is a V3 keystore file (geth, cast, ethers, ...), decrypted with its own passphrase (--passphrase-file, " +
		"which may be a pipe such as <(pass show key), or $" + ImportPassphraseEnv + "). A raw private key (64 hex digits) " +
		"comes from a file only you can read, or from standard input; never from the command line, where other users " +
		"(ps, /proc) and the shell history see it."
}

func (c *accountsImportCmd) rawKey() bool { return c.PrivateKeyFile != "" || c.PrivateKeyStdin }

func (c *accountsImportCmd) Run(ctx context.Context, env Env) error {
	raw := c.rawKey()
	switch {
	case strings.TrimSpace(c.Owner) == "":
		return usageError{errors.New("accounts import: --owner is required")}
	case c.PrivateKeyFile != "" && c.PrivateKeyStdin:
		return usageError{errors.New("accounts import: give --private-key-file or --private-key-stdin, not both")}
	case raw && c.KeyFile != "":
		return usageError{errors.New("accounts import: give either a KEYFILE or a raw private key (--private-key-file, --private-key-stdin), not both")}
	case raw && c.PassphraseFile != "":
		return usageError{errors.New("accounts import: --passphrase-file is the passphrase of a KEYFILE; a raw private key has none")}
	case !raw && c.KeyFile == "":
		return usageError{errors.New("accounts import: give a KEYFILE, or a raw private key with --private-key-file or --private-key-stdin")}
	}
	// The key to import is read (and a key file decrypted with its own passphrase) before the
	// keystore is unlocked: a wrong file or passphrase is told at once, and apart from a
	// wrong keystore passphrase, which comes from unlocking it.
	var priv *ecdsa.PrivateKey
	var err error
	if raw {
		priv, err = readRawKey(c.PrivateKeyFile, env.Stdin)
	} else {
		priv, err = readKeyFile(c.KeyFile, c.PassphraseFile)
	}
	if err != nil {
		return err
	}
	target := accountTarget{owner: c.Owner, backend: c.Backend, label: c.Label}
	if c.Backend == wallet.BackendPKCS11 {
		target.file = c.KeyFile
		if c.PrivateKeyFile != "-" {
			target.file = cmp.Or(c.PrivateKeyFile, c.KeyFile)
		}
	}
	return addAccount(ctx, env, "import", c.Config, target, priv)
}

// accountTarget is where accounts new or import puts a key: the owner, the backend and the
// key's label in it, and (import onto a token) the file the key came from, deleted after.
type accountTarget struct {
	owner, backend, label string
	file                  string
}

// addAccount creates a key for the target's owner (priv nil) or imports priv, in the target's
// backend, and prints its address.
func addAccount(ctx context.Context, env Env, sub, cfgPath string, target accountTarget, priv *ecdsa.PrivateKey) error {
	if target.backend != wallet.BackendKeystore {
		return addHardwareAccount(ctx, env, sub, cfgPath, target, priv)
	}
	owner := target.owner
	ctx, s, done, err := openStore(ctx, cfgPath, env.Stderr, 5*time.Minute)
	if err != nil {
		return err
	}
	defer done()
	keys, err := wallet.OpenKeys(s.cfg.Wallet.Keys, wallet.Deps{Logger: s.log, Store: s.db})
	if err != nil {
		return err
	}
	accounts := wallet.NewAccounts(keys, s.db)
	var addr common.Address
	if priv == nil {
		addr, err = accounts.Create(ctx, owner)
	} else {
		addr, err = accounts.ImportKey(ctx, owner, priv)
	}
	if errors.Is(err, wallet.ErrKeyExists) {
		return fmt.Errorf("accounts %s: %w: %s is already held for %s", sub, err, addr.Hex(), owner)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, addr.Hex())
	s.log.Debug("accounts command done", zap.String("command", sub))
	return nil
}

type accountsListCmd struct {
	configFlag
	Owner string `placeholder:"PRINCIPAL" help:"Only the accounts of this principal."`
}

func (c *accountsListCmd) Run(ctx context.Context, env Env) error {
	ctx, s, done, err := openStore(ctx, c.Config, env.Stderr, time.Minute)
	if err != nil {
		return err
	}
	defer done()
	return listAccounts(ctx, s.db, c.Owner, env.Stdout)
}

// keystoreDirArgs are the flags of export-keystore and import-keystore.
type keystoreDirArgs struct {
	configFlag
	Dir string `placeholder:"DIR" help:"The keystore directory to export into (empty or new) or import from (required)."`
}

func (a keystoreDirArgs) run(ctx context.Context, env Env, sub string) error {
	if a.Dir == "" {
		return usageError{fmt.Errorf("accounts %s: --dir is required", sub)}
	}
	ctx, s, done, err := openStore(ctx, a.Config, env.Stderr, 5*time.Minute)
	if err != nil {
		return err
	}
	defer done()
	return copyKeystoreCmd(ctx, sub, s.cfg.Wallet.Keys, a.Dir, wallet.Deps{Logger: s.log, Store: s.db}, env.Stdout)
}

// accountsExportKeystoreCmd copies the keys of the configured backend into a directory, as
// they are (encrypted with the keystore passphrase), each checked to decrypt first.
type accountsExportKeystoreCmd struct{ keystoreDirArgs }

func (c *accountsExportKeystoreCmd) Run(ctx context.Context, env Env) error {
	return c.run(ctx, env, "export-keystore")
}

// accountsImportKeystoreCmd copies the key files of a directory into the configured
// backend: the way from the keystore directory to the store.
type accountsImportKeystoreCmd struct{ keystoreDirArgs }

func (c *accountsImportKeystoreCmd) Run(ctx context.Context, env Env) error {
	return c.run(ctx, env, "import-keystore")
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
	fmt.Fprintln(tw, "ADDRESS\tOWNER\tBACKEND\tKEY\tCREATED")
	for _, a := range accs {
		ref := a.KeyRef
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Address.Hex(), a.Owner, a.Source, ref, a.CreatedAt.Format(time.RFC3339))
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
		return nil, fmt.Errorf("accounts import: %s: %w, read from %s%s", path, wallet.ErrFilePassphrase, from, wallet.PassphraseHint(pass))
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
