package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSigningKeyCreatedAndReused(t *testing.T) {
	log, logs := observedLogger()
	path := filepath.Join(t.TempDir(), "keys", "jwt-signing-key.pem")
	k1, err := LoadOrCreateSigningKey(path, log)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
	if created := logs.FilterMessage("created the JWT signing key file").All(); len(created) != 1 ||
		created[0].ContextMap()["kid"] != k1.KeyID() || created[0].ContextMap()["path"] != path {
		t.Fatalf("creation log = %v", logs.All())
	}

	// A restart reads the same file: same key, same kid, nothing created.
	k2, err := LoadOrCreateSigningKey(path, log)
	if err != nil {
		t.Fatal(err)
	}
	if k2.KeyID() != k1.KeyID() || !k2.PublicKey().Equal(k1.PublicKey()) {
		t.Fatalf("restart loaded another key: kid %s, want %s", k2.KeyID(), k1.KeyID())
	}
	if n := logs.FilterMessage("created the JWT signing key file").Len(); n != 1 {
		t.Fatalf("%d creation log lines after a restart, want 1", n)
	}

	// The file is PKCS#8 PEM; neither it nor the private key is in the logs.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatal("key file is not a PEM PRIVATE KEY")
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		t.Fatal(err)
	}
	text := logText(logs)
	for _, secret := range []string{string(raw), base64.StdEncoding.EncodeToString(block.Bytes)[:40],
		base64.RawURLEncoding.EncodeToString(k1.priv.Seed()), fmt.Sprintf("%x", k1.priv.Seed())} {
		if strings.Contains(text, secret) {
			t.Fatalf("the logs hold the private key:\n%s", text)
		}
	}
	// No fmt verb prints it either.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x"} {
		if s := fmt.Sprintf(verb, k1); strings.Contains(s, fmt.Sprintf("%x", k1.priv.Seed())) || strings.Contains(s, string(k1.priv)) || !strings.Contains(s, k1.KeyID()) {
			t.Fatalf("fmt %s of the key = %q", verb, s)
		}
	}
}

// TestSigningKeyRace: replicas starting at once on one shared file agree on one key.
func TestSigningKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwt-signing-key.pem")
	const n = 8
	kids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := LoadOrCreateSigningKey(path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = k.KeyID()
		})
	}
	wg.Wait()
	for i := range kids {
		if kids[i] != kids[0] {
			t.Fatalf("replica %d has kid %s, replica 0 %s", i, kids[i], kids[0])
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the key file", len(entries))
	}
}

func TestSigningKeyRefusesBadFiles(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, content, want string
	}{
		{"empty", "", "not a PEM"},
		{"not PEM", "hello", "not a PEM"},
		{"wrong block", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}})), "not a PEM"},
		{"garbage DER", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})), "not a PKCS#8"},
		{"ECDSA key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})), "not an Ed25519"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key.pem")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOrCreateSigningKey(path, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, path, tc.want)
			}
			if after, _ := os.ReadFile(path); string(after) != tc.content {
				t.Fatal("a bad key file was overwritten")
			}
		})
	}
}

func TestSigningKeyWarnsOnWideMode(t *testing.T) {
	log, logs := observedLogger()
	path := filepath.Join(t.TempDir(), "key.pem")
	if _, err := LoadOrCreateSigningKey(path, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateSigningKey(path, log); err != nil {
		t.Fatal(err)
	}
	if logs.FilterMessageSnippet("readable by group or others").Len() != 1 {
		t.Fatalf("no warning for mode 0644: %v", logs.All())
	}
}

func TestJWKS(t *testing.T) {
	k, err := LoadOrCreateSigningKey(filepath.Join(t.TempDir(), "key.pem"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(k.JWKS(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(k.PublicKey()),
		"kid": k.KeyID(), "use": "sig", "alg": "EdDSA"}
	if len(doc.Keys) != 1 || fmt.Sprint(doc.Keys[0]) != fmt.Sprint(want) {
		t.Fatalf("JWKS = %s, want the key %v", k.JWKS(), want)
	}
	if strings.Contains(string(k.JWKS()), `"d"`) {
		t.Fatal("the JWKS holds private key material")
	}
}

// TestThumbprintRFC8037: the kid is the RFC 7638 thumbprint; RFC 8037 appendix A.3 gives the
// thumbprint of its Ed25519 example key.
func TestThumbprintRFC8037(t *testing.T) {
	x, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := thumbprint(x), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("thumbprint = %s, want %s", got, want)
	}
}
