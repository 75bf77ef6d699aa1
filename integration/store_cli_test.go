package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/store"
)

// postgresConfigFile writes the shipped config with its store on PostgreSQL at dsn and
// store.migrate set to migrate.
func postgresConfigFile(t *testing.T, dsn, migrate string) string {
	t.Helper()
	dir := t.TempDir()
	text := strings.Replace(devConfig(t), "  driver: sqlite\n", "  driver: postgres\n  dsn: "+dsn+"\n", 1)
	text = strings.Replace(text, "  migrate: auto\n", "  migrate: "+migrate+"\n", 1)
	if !strings.Contains(text, "  migrate: "+migrate+"\n  # postgres only") {
		t.Fatal("config.yaml changed: the store driver was not replaced")
	}
	text = strings.Replace(text, "dir: keystore", "dir: "+filepath.Join(dir, "keystore"), 1)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStoreMigrateCommand: with store.migrate never the server refuses a database that needs
// migrations, naming the command; `web3gate store migrate` applies them, and a second run
// has nothing to do.
func TestStoreMigrateCommand(t *testing.T) {
	dsn := testengine.Postgres(t)
	cfgPath := postgresConfigFile(t, dsn, "never")

	code, out := runCLI(t, "", "serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(out, "store.migrate is never: run `web3gate store migrate` first") {
		t.Fatalf("serve on an unmigrated database: %d %s", code, out)
	}
	code, out = runCLI(t, "", "store", "migrate", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "store: migrated from schema version 0 to ") {
		t.Fatalf("store migrate: %d %s", code, out)
	}
	code, out = runCLI(t, "", "store", "migrate", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "nothing to migrate") {
		t.Fatalf("store migrate again: %d %s", code, out)
	}
	if code, out := runCLI(t, "", "store", "migrate", "extra"); code != 2 || !strings.Contains(out, "usage:") {
		t.Fatalf("store migrate extra: %d %s", code, out)
	}
	if code, out := runCLI(t, "", "store"); code != 2 || !strings.Contains(out, `expected one of "migrate", "copy"`) {
		t.Fatalf("store: %d %s", code, out)
	}
}

// TestStoreCopyCommand: `web3gate store copy` copies a SQLite store into PostgreSQL and says
// what it copied; the copied accounts are there; a second copy is refused.
func TestStoreCopyCommand(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "web3gate.db")
	lite := store.Config{Path: path}
	lite.SetDefaults()
	db, err := store.Open(ctx, lite, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a := store.Account{Owner: "alice", Source: store.SourceKeystore}
		a.Address[19] = byte(i + 1)
		if err := db.AddAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	dsn := testengine.Postgres(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "postgres:" + dsn}, "--from must be sqlite:PATH"},
		{[]string{"--from", path}, "--from must be sqlite:PATH"},
		{[]string{"--from", "sqlite:" + path}, "give the target"},
		{[]string{"--from", "sqlite:" + path, "--to", "host=127.0.0.1"}, "--to must be postgres:DSN"},
		{[]string{"--from", "sqlite:" + path, "--to", "postgres:"}, "--to must be postgres:DSN"},
		{[]string{"--from", "sqlite:" + path, "--to", "postgres:" + dsn, "--config", "x.yaml"}, "not both"},
	} {
		if code, out := runCLI(t, "", append([]string{"store", "copy"}, tc.args...)...); code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("store copy %q: %d %s, want exit 2 saying %q", tc.args, code, out, tc.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if code, out := runCLI(t, "", "store", "copy", "--from", "sqlite:"+missing, "--to", "postgres:"+dsn); code != 1 || !strings.Contains(out, "source") {
		t.Fatalf("copy from a missing file: %d %s", code, out)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("the copy created the missing source file")
	}

	code, out := runCLI(t, "", "store", "copy", "--from", "sqlite:"+path, "--to", "postgres:"+dsn)
	if code != 0 || !strings.Contains(out, "accounts             3\n") || !strings.Contains(out, "store copy: 3 rows in ") {
		t.Fatalf("store copy: %d %s", code, out)
	}
	pg := store.Config{Driver: store.DriverPostgres, DSN: dsn}
	pg.SetDefaults()
	pdb, err := store.Open(ctx, pg, store.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	if got, err := pdb.AccountsOf(ctx, "alice"); err != nil || len(got) != 3 {
		t.Fatalf("accounts on PostgreSQL after the copy: %v %v", got, err)
	}
	code, out = runCLI(t, "", "store", "copy", "--from", "sqlite:"+path, "--config", postgresConfigFile(t, dsn, "auto"))
	if code != 1 || !strings.Contains(out, "the target is not empty") {
		t.Fatalf("second copy: %d %s", code, out)
	}
}
