package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// run runs the command line and returns its exit code and its standard output and error.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = Main(context.Background(), Env{Version: "v9.9.9-test", Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errw}, args)
	return code, out.String(), errw.String()
}

// minimalConfig is a config whose state (the SQLite store) is in dir, served by a real
// upstream address that nothing needs to reach for the commands tested here.
func minimalConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	text := fmt.Sprintf(`
auth:
  clients: [{id: c1}]
upstreams:
  mainnet: 1
  chains: [{chainId: 1, urls: ["http://127.0.0.1:1/"]}]
store: {path: %q}
wallet: {keys: {dir: %q}}
%s`, filepath.Join(dir, "web3gate.db"), filepath.Join(dir, "keystore"), extra)
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHelp: --help and -h list every command and exit 0; each command's --help names its
// own flags and exits 0.
func TestHelp(t *testing.T) {
	for _, flag := range []string{"--help", "-h"} {
		code, out, _ := run(t, "", flag)
		if code != 0 {
			t.Errorf("%s: exit %d", flag, code)
		}
		for _, cmd := range []string{"serve", "healthcheck", "config check", "config print", "auth hash-token", "accounts new", "accounts import",
			"accounts list", "accounts export-keystore", "accounts import-keystore", "clients new", "clients list", "clients disable",
			"clients enable", "products import", "store migrate", "store copy", "version"} {
			if !regexp.MustCompile(`(?m)^  ` + cmd + `\s`).MatchString(out) {
				t.Errorf("%s does not list %q:\n%s", flag, cmd, out)
			}
		}
	}
	for _, tc := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"serve"}, []string{"--config=FILE", "--listen=HOST:PORT", "--admin-listen=HOST:PORT", "WEB3GATE_CONFIG"}},
		{[]string{"healthcheck"}, []string{"--url=URL", "--ready", "--admin-listen=HOST:PORT", "--timeout=", "--config=FILE"}},
		{[]string{"config", "check"}, []string{"--config=FILE"}},
		{[]string{"config", "print"}, []string{"--config=FILE"}},
		{[]string{"auth", "hash-token"}, []string{"standard input"}},
		{[]string{"accounts", "new"}, []string{"--owner=PRINCIPAL", "--config=FILE"}},
		{[]string{"accounts", "import"}, []string{"--owner=PRINCIPAL", "--passphrase-file=FILE", "--private-key-file=FILE", "--private-key-stdin", "KEYFILE"}},
		{[]string{"accounts", "list"}, []string{"--owner=PRINCIPAL"}},
		{[]string{"accounts", "export-keystore"}, []string{"--dir=DIR"}},
		{[]string{"accounts", "import-keystore"}, []string{"--dir=DIR"}},
		{[]string{"clients", "new"}, []string{"--principal=PRINCIPAL", "--scope=", "eth_sign"}},
		{[]string{"clients", "list"}, []string{"--principal=PRINCIPAL"}},
		{[]string{"clients", "disable"}, []string{"<CLIENT_ID>"}},
		{[]string{"clients", "enable"}, []string{"<CLIENT_ID>"}},
		{[]string{"products", "import"}, []string{"--dry-run", "<FILE>"}},
		{[]string{"store", "migrate"}, []string{"--config=FILE"}},
		{[]string{"store", "copy"}, []string{"--from=sqlite:PATH", "--to=postgres:DSN", "--config=FILE"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := run(t, "", append(tc.args, "--help")...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if !strings.Contains(out, "Usage: web3gate "+strings.Join(tc.args, " ")) {
				t.Errorf("no usage line:\n%s", out)
			}
			for _, f := range tc.flags {
				if !strings.Contains(out, f) {
					t.Errorf("help lacks %q:\n%s", f, out)
				}
			}
		})
	}
}

// TestVersion: `version` and `--version` print the version, the revision (when the build
// recorded one) and the Go release, exit 0, and
// --version wins over anything else on the line.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"--version", "store", "migrate"}, {"serve", "--version"}} {
		code, out, _ := run(t, "", args...)
		if code != 0 || !regexp.MustCompile(`^web3gate v9\.9\.9-test \((revision [0-9a-f]+(, modified)?, )?go\S+\)\n$`).MatchString(out) {
			t.Errorf("%q: exit %d, %q", args, code, out)
		}
	}
}

// TestUsageErrors: a command line that cannot be understood exits 2 and says why and where
// the usage is; nothing runs.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "commands: serve, healthcheck, config"}},
		{[]string{"--nope"}, []string{"unknown flag --nope", "see `web3gate --help`"}},
		{[]string{"serve", "extra"}, []string{"unexpected argument extra", "usage: web3gate serve [flags]"}},
		{[]string{"config"}, []string{`expected one of "check", "print"`}},
		{[]string{"accounts", "new"}, []string{"accounts new: --owner is required"}},
		{[]string{"accounts", "import", "--owner", "a"}, []string{"give a KEYFILE, or a raw private key"}},
		{[]string{"accounts", "import", "--owner", "a", "--private-key-stdin", "--private-key-file", "k"}, []string{"not both"}},
		{[]string{"accounts", "import", "--owner", "a", "--private-key", "k"}, []string{"there is no --private-key flag"}},
		{[]string{"accounts", "export-keystore"}, []string{"--dir is required"}},
		{[]string{"clients", "new"}, []string{"--principal is required"}},
		{[]string{"clients", "disable"}, []string{`expected "<CLIENT_ID>"`}},
		{[]string{"clients", "disable", "a", "b"}, []string{"unexpected argument b"}},
		{[]string{"store", "copy", "--from", "x"}, []string{"--from must be sqlite:PATH"}},
		{[]string{"--config", "x.yaml", "accounts", "list"}, []string{`flag --config applies to the default command "serve", not "accounts"`}},
		{[]string{"healthcheck", "--url", "http://127.0.0.1:1/healthz", "--ready"}, []string{"--url names the whole URL"}},
		{[]string{"healthcheck", "--timeout", "soon"}, []string{"--timeout"}},
		{[]string{"auth", "hash-token"}, []string{"give the token on standard input"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := run(t, "", tc.args...)
			if code != 2 || out != "" {
				t.Errorf("exit %d (want 2), stdout %q", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
}

// TestConfigFromEnvironment: WEB3GATE_CONFIG names the file when --config is not given;
// --config wins over it.
func TestConfigFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	good := minimalConfig(t, dir, "")
	t.Setenv(ConfigEnv, good)
	if code, out, errs := run(t, "", "config", "check"); code != 0 || out != good+": ok\n" {
		t.Fatalf("config check from $%s: exit %d %q %q", ConfigEnv, code, out, errs)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if code, _, errs := run(t, "", "config", "check", "--config", missing); code != 1 || !strings.Contains(errs, missing) {
		t.Fatalf("--config over $%s: exit %d %q", ConfigEnv, code, errs)
	}
	t.Setenv(ConfigEnv, missing)
	if code, _, errs := run(t, "", "--listen", "127.0.0.1:0"); code != 1 || !strings.Contains(errs, "config: open "+missing) {
		t.Fatalf("serve from $%s: exit %d %q", ConfigEnv, code, errs)
	}
}

// TestConfigPrint: the effective config with its defaults, the secrets masked (a DSN
// password from the environment holding quotes and a #), and loadable again.
func TestConfigPrint(t *testing.T) {
	dir := t.TempDir()
	const pass = `pa"ss#: word`
	t.Setenv("W3G_CLI_TEST_PG_PASSWORD", pass)
	t.Setenv("W3G_CLI_TEST_REDIS", "Redis5ecretValue")
	cfg := minimalConfig(t, dir, `redis: {url: "redis://:${W3G_CLI_TEST_REDIS}@127.0.0.1:6379/2"}
products: {admin: {tokens: [{name: ops, sha256: `+strings.Repeat("ab", 32)+`}]}}
`)
	code, out, errs := run(t, "", "config", "print", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, secret := range []string{"Redis5ecret", strings.Repeat("ab", 32)} {
		if strings.Contains(out, secret) {
			t.Fatalf("config print shows a secret:\n%s", out)
		}
	}
	for _, want := range []string{`url: "redis://:****@127.0.0.1:6379/2"`, "maxBatch: 100", "readyTimeout: 2s", `sha256: "****"`, "name: ops"} {
		if !strings.Contains(out, want) {
			t.Errorf("config print lacks %q:\n%s", want, out)
		}
	}
	if code, _, errs := run(t, "", "config", "print", "--config", filepath.Join(dir, "none.yaml")); code != 1 || !strings.Contains(errs, "no such file") {
		t.Fatalf("missing file: exit %d %s", code, errs)
	}
}

// TestClientsList: clients new, disable and list on a real SQLite store: every client with
// its principal and state, no secret, and --principal filters.
func TestClientsList(t *testing.T) {
	dir := t.TempDir()
	cfg := minimalConfig(t, dir, "")
	var ids, secrets []string
	for _, p := range []string{"alice", "bob"} {
		code, out, errs := run(t, "", "clients", "new", "--principal", p, "--config", cfg)
		id := regexp.MustCompile(`client_id:\s+(\S+)`).FindStringSubmatch(out)
		secret := regexp.MustCompile(`client_secret:\s+(\S+)`).FindStringSubmatch(out)
		if code != 0 || id == nil || secret == nil {
			t.Fatalf("clients new: exit %d %s %s", code, out, errs)
		}
		ids, secrets = append(ids, id[1]), append(secrets, secret[1])
	}
	if code, out, errs := run(t, "", "clients", "disable", ids[1], "--config", cfg); code != 0 || !strings.Contains(out, "disabled since") {
		t.Fatalf("clients disable: exit %d %s %s", code, out, errs)
	}
	code, out, errs := run(t, "", "clients", "list", "--config", cfg)
	if code != 0 {
		t.Fatalf("clients list: exit %d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CLIENT ID") ||
		!regexp.MustCompile(`^`+ids[0]+`\s+alice\s+eth_sign\s+\S+Z\s+-$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^`+ids[1]+`\s+bob\s+eth_sign\s+\S+Z\s+\S+Z$`).MatchString(lines[2]) {
		t.Fatalf("clients list:\n%s", out)
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Fatal("clients list shows a secret")
		}
	}
	if code, out, _ := run(t, "", "clients", "list", "--principal", "bob", "--config", cfg); code != 0 || strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) {
		t.Fatalf("clients list --principal bob: exit %d\n%s", code, out)
	}
}

// TestHealthcheck asks a real HTTP listener: 200 exits 0, anything else or no listener 1;
// --admin-listen on every address asks loopback; without flags the config's admin.listen.
func TestHealthcheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"status":"unavailable","reason":"chain 1: no healthy upstream"}`)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	cfg := minimalConfig(t, t.TempDir(), "admin: {listen: "+addr+"}\n")
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--url", "http://" + addr + "/healthz"}, 0, `http://` + addr + `/healthz: HTTP 200 {"status":"ok"}`},
		{[]string{"--admin-listen", "0.0.0.0:" + port}, 0, "http://127.0.0.1:" + port + "/healthz: HTTP 200"},
		{[]string{"--config", cfg}, 0, "http://" + addr + "/healthz: HTTP 200"},
		{[]string{"--config", cfg, "--ready"}, 1, `/readyz: HTTP 503 {"status":"unavailable","reason":"chain 1: no healthy upstream"}`},
		{[]string{"--url", "http://" + addr + "/nowhere"}, 1, "HTTP 404"},
		{[]string{"--admin-listen", closedAddr}, 1, "connection refused"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := run(t, "", append([]string{"healthcheck"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tc.code, tc.want, out, errs)
			}
		})
	}
}

// TestImportPassphraseTraps: `accounts import --passphrase-file` takes a pipe as a shell's
// <(...) gives it; a wrong passphrase says where it came from and what to check, on one
// line, without the passphrase; a missing one says how to give it.
func TestImportPassphraseTraps(t *testing.T) {
	dir := t.TempDir()
	cfg := minimalConfig(t, dir, "")
	cfgText, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(cfgText), "wallet: {keys: {dir:", "wallet: {keys: {lightScrypt: true, dir:", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", "keystore-pass-cli-test")
	os.Unsetenv(ImportPassphraseEnv)
	const filePass = `file "pass": #1`
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := crypto.PubkeyToAddress(priv.PublicKey)
	keyJSON, err := keystore.EncryptKey(&keystore.Key{Address: addr, PrivateKey: priv}, filePass, keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key.json")
	if err := os.WriteFile(keyFile, keyJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	pipe := func(content string) string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		if _, err := w.WriteString(content); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/dev/fd/%d", r.Fd())
	}
	imp := []string{"accounts", "import", "--owner", "alice", "--config", cfg}
	for _, tc := range []struct {
		name string
		env  string // WEB3GATE_IMPORT_PASSPHRASE; "" unset
		args []string
		code int
		want string
	}{
		{"wrong, with a trailing space", filePass + " ", []string{keyFile}, 1,
			"wrong passphrase for the key file (its own passphrase, not the keystore's), read from $WEB3GATE_IMPORT_PASSPHRASE; the passphrase given begins or ends with whitespace"},
		{"missing", "", []string{keyFile}, 2, "give the key file's passphrase with --passphrase-file or $WEB3GATE_IMPORT_PASSPHRASE"},
		{"a directory", "", []string{"--passphrase-file", dir, keyFile}, 1, "is a directory; give the file that holds the secret"},
		{"from a pipe", "", []string{"--passphrase-file", pipe(filePass + "\n"), keyFile}, 0, addr.Hex()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(ImportPassphraseEnv, tc.env)
			}
			code, out, errs := run(t, "", append(imp, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, tc.code, tc.want, out, errs)
			}
			if strings.Contains(out+errs, filePass) || strings.Count(errs, "\n") > 1 {
				t.Fatalf("the passphrase is shown, or the error spans lines: %q", errs)
			}
		})
	}
}

// TestDockerfileHealthcheck runs the Dockerfile's HEALTHCHECK command line against a
// listener standing in for the image's admin port: it must be a command line this binary
// takes, and ask /healthz.
func TestDockerfileHealthcheck(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^HEALTHCHECK .*\\\n\s+CMD (\[.*\])$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no HEALTHCHECK ... CMD [...] in the Dockerfile")
	}
	var argv []string
	if err := json.Unmarshal(m[1], &argv); err != nil || len(argv) < 2 || argv[0] != "/web3gate" || argv[1] != "healthcheck" {
		t.Fatalf("HEALTHCHECK CMD %s: want /web3gate healthcheck ... (%v)", m[1], err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Value
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Store(r.URL.Path) })}
	go srv.Serve(ln)
	defer srv.Close()
	args := slices.Clone(argv[1:])
	i := slices.Index(args, "127.0.0.1:9545")
	if i < 0 || !strings.Contains(string(raw), `"--admin-listen", "0.0.0.0:9545"`) {
		t.Fatalf("the HEALTHCHECK asks %q, not the admin port the ENTRYPOINT binds", args)
	}
	args[i] = ln.Addr().String()
	if code, out, errs := run(t, "", args...); code != 0 || asked.Load() != "/healthz" {
		t.Fatalf("HEALTHCHECK %q: exit %d, asked %v: %s%s", args, code, asked.Load(), out, errs)
	}
}

// TestEmptyConfigEnv: $WEB3GATE_CONFIG set but empty is config.yaml, as unset.
func TestEmptyConfigEnv(t *testing.T) {
	dir := t.TempDir()
	minimalConfig(t, dir, "")
	t.Chdir(dir)
	t.Setenv(ConfigEnv, "")
	if code, out, errs := run(t, "", "config", "check"); code != 0 || out != "config.yaml: ok\n" {
		t.Fatalf("exit %d %q %q", code, out, errs)
	}
}
