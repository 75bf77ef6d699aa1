package e2e

import (
	"crypto/ecdsa"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/crypto"
)

// TestAccountsCLI drives `web3gate accounts new|import|list` against a real keystore
// directory and SQLite file.
func TestAccountsCLI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, shippedConfig(t, dir, "lightScrypt: false", "lightScrypt: true"))
	const servicePass = "service-passphrase-e2e"
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(binary, append(args, "--config", cfgPath)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), servicePass) {
			t.Fatalf("the keystore passphrase appeared in the output:\n%s", out)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
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
		{"wrong file passphrase", append(withPass, "WEB3GATE_IMPORT_PASSPHRASE=nope"), []string{"accounts", "import", "--owner", "carol", keyFile}, 1, "import key"},
		{"no import passphrase", withPass, []string{"accounts", "import", "--owner", "carol", keyFile}, 2, "--passphrase-file or $WEB3GATE_IMPORT_PASSPHRASE"},
		{"no keystore passphrase", []string{"WEB3GATE_KEYSTORE_PASSPHRASE="}, []string{"accounts", "new", "--owner", "carol"}, 1, "WEB3GATE_KEYSTORE_PASSPHRASE"},
		{"wrong keystore passphrase", []string{"WEB3GATE_KEYSTORE_PASSPHRASE=wrong"}, []string{"accounts", "new", "--owner", "carol"}, 1, "UTC--"},
		{"no owner", withPass, []string{"accounts", "new"}, 2, "--owner is required"},
		{"unknown subcommand", withPass, []string{"accounts", "delete"}, 2, `unknown accounts command "delete"`},
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
