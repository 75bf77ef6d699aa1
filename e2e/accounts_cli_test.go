package e2e

import (
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/e2e/anvil"
)

// TestAccountsCLI drives `web3gate accounts new|import|list` against a real keystore
// directory and SQLite file.
func TestAccountsCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, shippedConfig(t, dir, "lightScrypt: false", "lightScrypt: true"))
	const servicePass = "service-passphrase-e2e"
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		return runCLI(t, env, "", []string{servicePass}, append(args, "--config", cfgPath)...)
	}
	withPass := []string{"WEB3GATE_KEYSTORE_PASSPHRASE=" + servicePass}
	addrRE := regexp.MustCompile(`0x[0-9a-fA-F]{40}`)

	out, code := run(withPass, "accounts", "new", "--owner", "alice")
	alice := addrRE.FindString(out)
	if code != 0 || alice == "" {
		t.Fatalf("accounts new: %d %s", code, out)
	}
	out, code = run(withPass, "accounts", "new", "--owner", "bob")
	bob := addrRE.FindString(out)
	if code != 0 || bob == "" {
		t.Fatalf("accounts new: %d %s", code, out)
	}

	// A key file made elsewhere, imported with its own passphrase from a file.
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	imported := crypto.PubkeyToAddress(priv.PublicKey)
	keyJSON, err := keystore.EncryptKey(&keystore.Key{Address: imported, PrivateKey: priv}, "file-pass", keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, passFile := filepath.Join(dir, "key.json"), filepath.Join(dir, "pass.txt")
	os.WriteFile(keyFile, keyJSON, 0o600)
	os.WriteFile(passFile, []byte("file-pass\n"), 0o600)
	out, code = run(withPass, "accounts", "import", "--owner", "alice", "--passphrase-file", passFile, keyFile)
	if code != 0 || !strings.Contains(out, imported.Hex()) {
		t.Fatalf("accounts import: %d %s", code, out)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"import again", withPass, []string{"accounts", "import", "--owner", "alice", "--passphrase-file", passFile, keyFile}, 1, "key already exists"},
		{"import another's key", withPass, []string{"accounts", "import", "--owner", "bob", "--passphrase-file", passFile, keyFile}, 1, "held for another principal"},
		{"wrong file passphrase", append(withPass, "WEB3GATE_IMPORT_PASSPHRASE=nope"), []string{"accounts", "import", "--owner", "carol", keyFile}, 1, "wrong passphrase for the key file (its own passphrase, not the keystore's), read from $WEB3GATE_IMPORT_PASSPHRASE"},
		{"no import passphrase", withPass, []string{"accounts", "import", "--owner", "carol", keyFile}, 2, "--passphrase-file or $WEB3GATE_IMPORT_PASSPHRASE"},
		{"no keystore passphrase", []string{"WEB3GATE_KEYSTORE_PASSPHRASE="}, []string{"accounts", "new", "--owner", "carol"}, 1, "WEB3GATE_KEYSTORE_PASSPHRASE"},
		{"wrong keystore passphrase", []string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, []string{"accounts", "new", "--owner", "carol"}, 1, "UTC--"},
		{"wrong keystore passphrase, named", []string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, []string{"accounts", "new", "--owner", "carol"}, 1, "wrong keystore passphrase (from env WEB3GATE_KEYSTORE_PASSPHRASE)"},
		{"no owner", withPass, []string{"accounts", "new"}, 2, "--owner is required"},
		{"unknown subcommand", withPass, []string{"accounts", "delete"}, 2, "unexpected argument delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(tc.env, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s", code, tc.code, tc.want, out)
			}
		})
	}

	out, code = run(nil, "accounts", "list", "--owner", "alice")
	if code != 0 || !strings.Contains(out, alice) || !strings.Contains(out, imported.Hex()) || strings.Contains(out, bob) {
		t.Fatalf("alice's list: %d %s", code, out)
	}
	out, code = run(nil, "accounts", "list")
	if code != 0 || strings.Count(out, "0x") != 3 {
		t.Fatalf("full list: %d %s", code, out)
	}
	// Keys stay encrypted at rest, readable by the owner only.
	files, _ := filepath.Glob(filepath.Join(dir, "keystore", "UTC--*"))
	if len(files) != 3 {
		t.Fatalf("%d key files", len(files))
	}
	for _, f := range files {
		st, _ := os.Stat(f)
		b, _ := os.ReadFile(f)
		if st.Mode().Perm() != 0o600 || strings.Contains(string(b), strings.TrimPrefix(hexKey(priv), "0x")) {
			t.Fatalf("key file %s: mode %v or plaintext key", f, st.Mode().Perm())
		}
	}
}

func hexKey(k *ecdsa.PrivateKey) string { return hex.EncodeToString(crypto.FromECDSA(k)) }

// castForImport is the cast binary installed by `npm ci --prefix e2e`.
func castForImport(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("node_modules/@foundry-rs/cast-linux-amd64/bin/cast")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("cast is not installed: run `npm ci --prefix e2e` (make test does): %v", err)
	}
	return bin
}

// importSource is a key made by a tool, to import with `web3gate accounts import`.
type importSource struct {
	name  string
	args  []string // after `accounts import --owner e2e`
	stdin string
	want  common.Address
}

// TestAccountsImportFromTools imports keys as people have them: key files written by geth
// (go-ethereum's keystore.StoreKey, what `geth account new` runs), cast (`cast wallet new`
// and `cast wallet import`), ethers v6 (`encrypt`, `encryptSync`, default parameters) and the
// Web3 Secret Storage pbkdf2 vector, and raw hex keys from a file and from standard input.
// It checks the refusals (a key on the command line, a key file others can read, each wrong
// passphrase told apart), lists the accounts, then starts the gateway on anvil and sends a
// transaction from each imported account.
func TestAccountsImportFromTools(t *testing.T) {
	const (
		chainID  = 31337
		filePass = "tools-file-passphrase"
	)
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", signingPassphrase)
	t.Setenv("WEB3GATE_IMPORT_PASSPHRASE", "") // a developer's own plays no part
	os.Unsetenv("WEB3GATE_IMPORT_PASSPHRASE")
	dir, src := t.TempDir(), t.TempDir()
	node := anvil.Start(t, chainID)
	cfgText := signingConfig(dir, chainID, "{}", node.URL)
	cfgPath := writeConfig(t, dir, cfgText)
	secretFile := func(name, content string, perm os.FileMode) string {
		t.Helper()
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passFile := secretFile("pass.txt", filePass+"\n", 0o600)
	wrongPassFile := secretFile("wrong-pass.txt", "not "+filePass+"\n", 0o600)
	newKey := func() (string, common.Address) {
		k, err := crypto.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		return hexKey(k), crypto.PubkeyToAddress(k.PublicKey)
	}
	var secrets []string // must never appear in any output
	var sources []importSource

	// geth: keystore.StoreKey is what `geth account new --keystore DIR --lightkdf` runs.
	gethAcc, err := keystore.StoreKey(filepath.Join(src, "geth"), filePass, keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	sources = append(sources, importSource{"geth account new", []string{"--passphrase-file", passFile, gethAcc.URL.Path}, "", gethAcc.Address})

	// cast wallet new DIR: a file named by its uuid, without an address member.
	cast := castForImport(t)
	castDir := filepath.Join(src, "cast")
	if err := os.Mkdir(castDir, 0o700); err != nil {
		t.Fatal(err)
	}
	castNew := exec.Command(cast, "wallet", "new", castDir)
	castNew.Env = append(os.Environ(), "CAST_PASSWORD="+filePass)
	out, err := castNew.CombinedOutput()
	castAddr := addressRE.FindString(string(out))
	castFiles, _ := filepath.Glob(filepath.Join(castDir, "*"))
	if err != nil || castAddr == "" || len(castFiles) != 1 {
		t.Fatalf("cast wallet new: %v, files %q\n%s", err, castFiles, out)
	}
	sources = append(sources, importSource{"cast wallet new", []string{"--passphrase-file", passFile, castFiles[0]}, "", common.HexToAddress(castAddr)})

	// cast wallet import NAME --private-key KEY: a known key, into a file named NAME.
	castKey, castKeyAddr := newKey()
	secrets = append(secrets, castKey)
	castImport := exec.Command(cast, "wallet", "import", "-k", castDir, "--unsafe-password", filePass, "--private-key", castKey, "imported")
	if out, err := castImport.CombinedOutput(); err != nil {
		t.Fatalf("cast wallet import: %v\n%s", err, out)
	}
	sources = append(sources, importSource{"cast wallet import", []string{"--passphrase-file", passFile, filepath.Join(castDir, "imported")}, "", castKeyAddr})

	// ethers v6: Wallet.encrypt and encryptSync with ethers' default scrypt parameters.
	ethersDir := filepath.Join(src, "ethers")
	if err := os.Mkdir(ethersDir, 0o700); err != nil {
		t.Fatal(err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the ethers key files: install Node.js 20+ (.ci/run does)")
	}
	script := exec.Command(nodeBin, "js/ethers-keystore.mjs")
	script.Env = append(os.Environ(), "KEYSTORE_DIR="+ethersDir, "KEYSTORE_PASS="+filePass)
	script.Stderr = os.Stderr
	out, err = script.Output()
	var ethersAddrs map[string]common.Address
	if err != nil || json.Unmarshal(out, &ethersAddrs) != nil || len(ethersAddrs) != 2 {
		t.Fatalf("ethers-keystore.mjs: %v: %s", err, out)
	}
	for _, name := range []string{"encrypt.json", "encrypt-sync.json"} {
		sources = append(sources, importSource{"ethers " + name, []string{"--passphrase-file", passFile, filepath.Join(ethersDir, name)}, "", ethersAddrs[name]})
	}

	// pbkdf2: the Web3 Secret Storage test vector (no tool above writes pbkdf2 files).
	specPass := secretFile("spec-pass.txt", "testpassword\n", 0o600)
	specKey := "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"
	sources = append(sources, importSource{"pbkdf2 key file", []string{"--passphrase-file", specPass, "../wallet/testdata/keyfiles/web3-secret-storage-pbkdf2.json"}, "", addressOf(t, specKey)})

	// Raw hex keys: from a file (0x, newline), from stdin as "-" and with --private-key-stdin.
	rawKeys := make([]string, 3)
	rawAddrs := make([]common.Address, 3)
	for i := range rawKeys {
		rawKeys[i], rawAddrs[i] = newKey()
	}
	secrets = append(secrets, rawKeys...)
	rawFile := secretFile("key.txt", "0x"+rawKeys[0]+"\n", 0o600)
	sources = append(sources,
		importSource{"raw key from a file", []string{"--private-key-file", rawFile}, "", rawAddrs[0]},
		importSource{"raw key from stdin as -", []string{"--private-key-file", "-"}, "  " + rawKeys[1] + " \n", rawAddrs[1]},
		importSource{"raw key with --private-key-stdin", []string{"--private-key-stdin"}, "0x" + rawKeys[2] + "\r\n", rawAddrs[2]},
	)

	run := func(env []string, stdin string, args ...string) (string, int) {
		t.Helper()
		return runCLI(t, env, stdin, append(secrets, signingPassphrase, filePass), append(args, "--config", cfgPath)...)
	}

	importOK := func(s importSource) {
		t.Run(s.name, func(t *testing.T) {
			out, code := run(nil, s.stdin, append([]string{"accounts", "import", "--owner", "e2e"}, s.args...)...)
			if code != 0 || !strings.Contains(out, s.want.Hex()) {
				t.Fatalf("exit %d, want 0 and %s:\n%s", code, s.want.Hex(), out)
			}
		})
	}
	// A wrong keystore passphrase is only told once the keystore holds a key: the geth one
	// comes first, and the refusals are tried with it alone in the keystore (each command
	// unlocks the whole keystore, which costs scrypt work per key).
	importOK(sources[0])

	otherKey, _ := newKey()
	secrets = append(secrets, otherKey)
	openKeyFile := secretFile("open-key.txt", otherKey+"\n", 0o644)
	keyAsKeyfile := secretFile("key-as-keyfile.txt", otherKey+"\n", 0o600)
	imp := []string{"accounts", "import", "--owner", "e2e"}
	for _, tc := range []struct {
		name  string
		env   []string
		stdin string
		args  []string
		code  int
		want  []string
		not   string
	}{
		{"wrong file passphrase from a file", nil, "", []string{"--passphrase-file", wrongPassFile, gethAcc.URL.Path}, 1,
			[]string{"wrong passphrase for the key file (its own passphrase, not the keystore's), read from --passphrase-file " + wrongPassFile}, "keystore passphrase"},
		{"wrong file passphrase from the environment", []string{"WEB3GATE_IMPORT_PASSPHRASE=nope"}, "", []string{castFiles[0]}, 1,
			[]string{"wrong passphrase for the key file", "read from $WEB3GATE_IMPORT_PASSPHRASE"}, "keystore passphrase"},
		{"wrong keystore passphrase", []string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, otherKey, []string{"--private-key-stdin"}, 1,
			[]string{"wrong keystore passphrase (from env WEB3GATE_KEYSTORE_PASSPHRASE)"}, "key file (its own"},
		{"wrong keystore passphrase, right file passphrase", []string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, "", []string{"--passphrase-file", passFile, gethAcc.URL.Path}, 1,
			[]string{"wrong keystore passphrase"}, "key file (its own"},
		{"key as an argument", nil, "", []string{otherKey}, 2,
			[]string{"looks like a private key", "ps, /proc", "shell history", "--private-key-file"}, ""},
		{"0x key as an argument", nil, "", []string{"0x" + otherKey}, 2, []string{"looks like a private key"}, ""},
		{"--private-key KEY", nil, "", []string{"--private-key", "0x" + otherKey}, 2, []string{"there is no --private-key flag"}, ""},
		{"--private-key=KEY", nil, "", []string{"--private-key=" + otherKey}, 2, []string{"there is no --private-key flag"}, ""},
		{"--private-key-stdin=KEY", nil, "", []string{"--private-key-stdin=0x" + otherKey}, 2, []string{"looks like a private key"}, ""},
		{"key file others can read", nil, "", []string{"--private-key-file", openKeyFile}, 1,
			[]string{"private key file " + openKeyFile + ": mode 0644 gives group or others access", "chmod 600"}, ""},
		{"raw key given as KEYFILE", nil, "", []string{"--passphrase-file", passFile, keyAsKeyfile}, 2,
			[]string{"holds a raw hex private key, not a key file", "--private-key-file " + keyAsKeyfile}, ""},
		{"an address on stdin", nil, addressOf(t, otherKey).Hex(), []string{"--private-key-stdin"}, 1, []string{"an address, not a private key"}, ""},
		{"nothing on stdin", nil, "", []string{"--private-key-file", "-"}, 1, []string{"private key from standard input: not a hex private key: empty"}, ""},
		{"raw key and a passphrase file", nil, otherKey, []string{"--private-key-stdin", "--passphrase-file", passFile}, 2, []string{"a raw private key has none"}, ""},
		{"raw key and a KEYFILE", nil, otherKey, []string{"--private-key-stdin", gethAcc.URL.Path}, 2, []string{"not both"}, ""},
		{"file and stdin", nil, otherKey, []string{"--private-key-stdin", "--private-key-file", rawFile}, 2, []string{"not both"}, ""},
		{"import again", nil, "", []string{"--passphrase-file", passFile, gethAcc.URL.Path}, 1, []string{"key already exists: " + gethAcc.Address.Hex() + " is already held for e2e"}, ""},
		{"another's key", nil, "", []string{"--owner", "mallory", "--passphrase-file", passFile, gethAcc.URL.Path}, 1, []string{"held for another principal"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(tc.env, tc.stdin, append(imp, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if tc.not != "" && strings.Contains(out, tc.not) {
				t.Errorf("output has %q", tc.not)
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}

	for _, s := range sources[1:] {
		importOK(s)
	}
	list, code := run(nil, "", "accounts", "list", "--owner", "e2e")
	if code != 0 {
		t.Fatalf("accounts list: exit %d\n%s", code, list)
	}
	for _, s := range sources {
		if !strings.Contains(list, s.want.Hex()) {
			t.Errorf("accounts list lacks %s (%s):\n%s", s.want.Hex(), s.name, list)
		}
	}
	if n := strings.Count(list, "0x"); n != len(sources) {
		t.Fatalf("accounts list shows %d accounts, want %d:\n%s", n, len(sources), list)
	}

	// The gateway signs with every imported key: one transfer from each, mined.
	g := startGateway(t, cfgText)
	waitReady(t, g)
	url := g.API + "/v1/web3/chains/31337"
	for _, s := range sources {
		fund(t, node, s.want)
		code, r, err := call(url, "eth_sendTransaction", txObject(s.want, true, nil))
		if err != nil || code != 200 || r.Error != nil {
			t.Fatalf("%s: eth_sendTransaction: HTTP %d, %v, %v", s.name, code, r, err)
		}
		var hash string
		if err := json.Unmarshal(r.Result, &hash); err != nil {
			t.Fatalf("%s: result %s", s.name, r.Result)
		}
		if rc := waitReceipt(t, node, hash); rc.Status != "0x1" || !strings.EqualFold(rc.From, s.want.Hex()) {
			t.Fatalf("%s: receipt status %s from %s, want 0x1 from %s", s.name, rc.Status, rc.From, s.want.Hex())
		}
	}
	for _, s := range append(secrets, signingPassphrase, filePass) {
		if strings.Contains(strings.ToLower(g.logs.String()), strings.ToLower(s)) {
			t.Fatal("a secret appeared in the gateway's logs")
		}
	}
}

func addressOf(t *testing.T, keyHex string) common.Address {
	t.Helper()
	k, err := crypto.HexToECDSA(keyHex)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

// TestAccountsCLIStoreBackend: with wallet.keys.backend: store, `accounts new|import|list`
// keep the keys in the store (nothing in the keystore directory), and a server that was
// already running on that store signs for them at once, as another replica would.
func TestAccountsCLIStoreBackend(t *testing.T) {
	dir := t.TempDir()
	const servicePass = "service-passphrase-e2e-store"
	cfgText := shippedConfig(t, dir, "lightScrypt: false", "lightScrypt: true", "backend: dir", "backend: store")
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", servicePass)
	g := startGatewayIn(t, dir, cfgText)
	cfgPath := filepath.Join(dir, "config.yaml")
	run := func(env []string, stdin string, args ...string) (string, int) {
		t.Helper()
		return runCLI(t, env, stdin, []string{servicePass}, append(args, "--config", cfgPath)...)
	}
	addrRE := regexp.MustCompile(`0x[0-9a-fA-F]{40}`)

	out, code := run(nil, "", "accounts", "new", "--owner", "dev")
	created := addrRE.FindString(out)
	if code != 0 || created == "" {
		t.Fatalf("accounts new: %d %s", code, out)
	}
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	imported := crypto.PubkeyToAddress(priv.PublicKey).Hex()
	out, code = run(nil, hexKey(priv)+"\n", "accounts", "import", "--owner", "dev", "--private-key-stdin")
	if code != 0 || !strings.Contains(out, imported) {
		t.Fatalf("accounts import: %d %s", code, out)
	}
	out, code = run(nil, hexKey(priv)+"\n", "accounts", "import", "--owner", "dev", "--private-key-stdin")
	if code != 1 || !strings.Contains(out, "key already exists") {
		t.Fatalf("second accounts import: %d %s", code, out)
	}
	out, code = run(nil, "", "accounts", "list", "--owner", "dev")
	if code != 0 || !strings.Contains(out, created) || !strings.Contains(out, imported) {
		t.Fatalf("accounts list: %d %s", code, out)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "keystore")); len(entries) != 0 {
		t.Fatalf("the keystore directory holds %d entries with backend store (%v)", len(entries), err)
	}

	// The running server finds both keys, added after it started, when first asked.
	c := dialGateway(t, g.API+"/v1/web3/mainnet", devCreds)
	var accts []string
	if err := rpcCall(c, &accts, "eth_accounts"); err != nil {
		t.Fatalf("eth_accounts: %v", err)
	}
	for _, want := range []string{created, imported} {
		if !slices.Contains(accts, want) {
			t.Errorf("eth_accounts %v lacks %s", accts, want)
		}
	}
	for _, addr := range []string{created, imported} {
		var sig hexutil.Bytes
		if err := rpcCall(c, &sig, "personal_sign", "0x68656c6c6f", addr); err != nil {
			t.Fatalf("personal_sign as %s: %v", addr, err)
		}
		if len(sig) != 65 {
			t.Fatalf("signature of %d bytes", len(sig))
		}
		sig[64] -= 27
		pub, err := crypto.SigToPub(accounts.TextHash([]byte("hello")), sig)
		if err != nil || crypto.PubkeyToAddress(*pub).Hex() != addr {
			t.Fatalf("personal_sign as %s: signed by another key (%v)", addr, err)
		}
	}

	// A process with another keystore passphrase is refused, naming the key in the store.
	out, code = run([]string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, "", "accounts", "new", "--owner", "dev")
	for _, want := range []string{"in the store", "wrong keystore passphrase (from env WEB3GATE_KEYSTORE_PASSPHRASE)"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("accounts new with a wrong passphrase: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(g.logs.String(), servicePass) || strings.Contains(g.logs.String(), hexKey(priv)) {
		t.Fatal("the server logged the passphrase or a key")
	}
}

// TestAccountsKeystoreMigration moves an installation's keys from the keystore directory into
// the store with `accounts import-keystore`, and back out with `accounts export-keystore`:
// the key files are copied as they are, each checked against the keystore passphrase first,
// and a server on the store then signs for every account.
func TestAccountsKeystoreMigration(t *testing.T) {
	dir := t.TempDir()
	const servicePass = "service-passphrase-e2e-migrate"
	t.Setenv("WEB3GATE_KEYSTORE_PASSPHRASE", servicePass)
	dirCfg := writeConfigAs(t, dir, "dir.yaml", shippedConfig(t, dir, "lightScrypt: false", "lightScrypt: true"))
	storeText := shippedConfig(t, dir, "lightScrypt: false", "lightScrypt: true", "backend: dir", "backend: store")
	storeCfg := writeConfigAs(t, dir, "store.yaml", storeText)
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		return runCLI(t, env, "", []string{servicePass}, args...)
	}
	addrRE := regexp.MustCompile(`0x[0-9a-fA-F]{40}`)
	var created []string
	for range 2 {
		out, code := run(nil, "accounts", "new", "--owner", "dev", "--config", dirCfg)
		if code != 0 || addrRE.FindString(out) == "" {
			t.Fatalf("accounts new: %d %s", code, out)
		}
		created = append(created, addrRE.FindString(out))
	}
	keystoreDir := filepath.Join(dir, "keystore")

	// A wrong passphrase copies nothing.
	out, code := run([]string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, "accounts", "import-keystore", "--dir", keystoreDir, "--config", storeCfg)
	if code != 1 || !strings.Contains(out, "wrong keystore passphrase") {
		t.Fatalf("import-keystore with a wrong passphrase: exit %d:\n%s", code, out)
	}
	out, code = run(nil, "accounts", "export-keystore", "--dir", t.TempDir(), "--config", storeCfg)
	if code != 0 || !strings.Contains(out, "0 keys copied") {
		t.Fatalf("export-keystore of an empty store after a refused import: exit %d:\n%s", code, out)
	}

	out, code = run(nil, "accounts", "import-keystore", "--dir", keystoreDir, "--config", storeCfg)
	if code != 0 || !strings.Contains(out, "2 keys copied, 0 already present") {
		t.Fatalf("import-keystore: exit %d:\n%s", code, out)
	}
	out, code = run(nil, "accounts", "import-keystore", "--dir", keystoreDir, "--config", storeCfg)
	if code != 0 || !strings.Contains(out, "0 keys copied, 2 already present") {
		t.Fatalf("import-keystore again: exit %d:\n%s", code, out)
	}
	out, code = run(nil, "accounts", "export-keystore", "--dir", keystoreDir, "--config", storeCfg)
	if code != 1 || !strings.Contains(out, "holds key files already") {
		t.Fatalf("export-keystore into a directory holding keys: exit %d:\n%s", code, out)
	}
	out, code = run(nil, "accounts", "import-keystore", "--config", storeCfg)
	if code != 2 || !strings.Contains(out, "--dir is required") {
		t.Fatalf("import-keystore without --dir: exit %d:\n%s", code, out)
	}

	// Exported files are V3 key files only their owner reads, under the service passphrase.
	exported := filepath.Join(dir, "exported")
	out, code = run(nil, "accounts", "export-keystore", "--dir", exported, "--config", storeCfg)
	if code != 0 || !strings.Contains(out, "2 keys copied") {
		t.Fatalf("export-keystore: exit %d:\n%s", code, out)
	}
	entries, err := os.ReadDir(exported)
	if err != nil || len(entries) != 2 {
		t.Fatalf("export-keystore wrote %d files (%v)", len(entries), err)
	}
	var got []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v (%v), want 0600", e.Name(), info.Mode(), err)
		}
		js, err := os.ReadFile(filepath.Join(exported, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		k, err := keystore.DecryptKey(js, servicePass)
		if err != nil {
			t.Fatalf("%s does not decrypt with the keystore passphrase: %v", e.Name(), err)
		}
		got = append(got, k.Address.Hex())
	}
	slices.Sort(got)
	slices.Sort(created)
	if !slices.Equal(got, created) {
		t.Fatalf("exported %v, want %v", got, created)
	}

	// A server on the store signs for both, with an empty keystore directory.
	if err := os.RemoveAll(keystoreDir); err != nil {
		t.Fatal(err)
	}
	g := startGatewayIn(t, dir, storeText)
	c := dialGateway(t, g.API+"/v1/web3/mainnet", devCreds)
	for _, addr := range created {
		var sig hexutil.Bytes
		if err := rpcCall(c, &sig, "personal_sign", "0x68656c6c6f", addr); err != nil {
			t.Fatalf("personal_sign as %s after the migration: %v", addr, err)
		}
	}
}

// runCLI runs the binary with args, the environment plus env and stdin, and returns its
// combined output and exit code; the test fails if any of secrets (compared without case)
// appears in the output.
func runCLI(t *testing.T, env []string, stdin string, secrets []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	for _, s := range secrets {
		if strings.Contains(strings.ToLower(string(out)), strings.ToLower(s)) {
			t.Fatalf("a secret appeared in the output of %q:\n%s", args, out)
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// writeConfigAs writes text to dir/name and returns its path.
func writeConfigAs(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
