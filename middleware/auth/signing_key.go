package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// SigningKey is the Ed25519 key that signs web3gate's access tokens. Its String, GoString and
// Format never show the private half.
type SigningKey struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	kid  string
	jwks []byte
}

// LoadOrCreateSigningKey reads the PEM (PKCS#8) Ed25519 private key at path, or, when there
// is no file, creates one (mode 0600, its directory 0700) and logs that it did (the path and
// key id, never the key). Replicas starting at once on a shared file end up with the same
// key: the file is written aside and linked into place, and the loser of the race reads the
// winner's file.
func LoadOrCreateSigningKey(path string, log *zap.Logger) (*SigningKey, error) {
	if log == nil {
		log = zap.NewNop()
	}
	raw, err := os.ReadFile(path)
	created := false
	if errors.Is(err, fs.ErrNotExist) {
		raw, created, err = createKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	k, err := parseSigningKey(raw)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	if created {
		log.Info("created the JWT signing key file", zap.String("path", path), zap.String("kid", k.kid))
	} else if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("the JWT signing key file is readable by group or others; chmod 600 it",
			zap.String("path", path), zap.String("mode", st.Mode().Perm().String()))
	}
	return k, nil
}

// NewSigningKey wraps an Ed25519 private key (for tests and for keys held elsewhere).
func NewSigningKey(priv ed25519.PrivateKey) (*SigningKey, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("signing key: not an Ed25519 private key")
	}
	pub := priv.Public().(ed25519.PublicKey)
	k := &SigningKey{priv: priv, pub: pub, kid: thumbprint(pub)}
	jwks, err := json.Marshal(jwkSet{Keys: []jwk{{KTY: "OKP", CRV: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub),
		KID: k.kid, Use: "sig", Alg: "EdDSA"}}})
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	k.jwks = jwks
	return k, nil
}

// KeyID is the kid header of the tokens the key signs: the RFC 7638 JWK thumbprint
// (base64url SHA-256) of the public key.
func (k *SigningKey) KeyID() string { return k.kid }

// PublicKey is the public half.
func (k *SigningKey) PublicKey() ed25519.PublicKey { return k.pub }

// JWKS is the public key as a JSON Web Key Set document (RFC 7517).
func (k *SigningKey) JWKS() []byte { return append([]byte(nil), k.jwks...) }

// String names the key by its id only.
func (k *SigningKey) String() string { return "Ed25519 signing key " + k.kid }

// GoString is String, so %#v does not print the private key.
func (k *SigningKey) GoString() string { return k.String() }

// Format is String for every verb, so no fmt verb prints the private key.
func (k *SigningKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

type jwkSet struct {
	Keys []jwk `json:"keys"`
}

type jwk struct {
	KTY string `json:"kty"`
	CRV string `json:"crv"`
	X   string `json:"x"`
	KID string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 public key: the base64url SHA-256
// of its required members in lexicographic order, without whitespace.
func thumbprint(pub ed25519.PublicKey) string {
	h := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

func parseSigningKey(raw []byte) (*SigningKey, error) {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New(`not a PEM "PRIVATE KEY" block (PKCS#8)`)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 private key", key)
	}
	return NewSigningKey(priv)
}

// createKeyFile writes a new key to path unless a file appears there first. It returns the
// contents of the file at path and whether this call created it.
func createKeyFile(path string) ([]byte, bool, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, err
	}
	raw := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	tmp, err := os.CreateTemp(dir, ".jwt-signing-key-*.tmp") // mode 0600
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(raw); err != nil {
		_ = tmp.Close()
		return nil, false, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return nil, false, err
	}
	if err := tmp.Close(); err != nil {
		return nil, false, err
	}
	// A link never replaces an existing file, and path appears complete or not at all.
	err = os.Link(tmp.Name(), path)
	switch {
	case err == nil:
		syncDir(dir)
		return raw, true, nil
	case errors.Is(err, fs.ErrExist):
		existing, err := os.ReadFile(path)
		return existing, false, err
	}
	// No hard links on this file system: create exclusively instead.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		existing, err := os.ReadFile(path)
		return existing, false, err
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := f.Write(raw); err != nil {
		_ = f.Close()
		return nil, false, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, false, err
	}
	if err := f.Close(); err != nil {
		return nil, false, err
	}
	syncDir(dir)
	return raw, true, nil
}

// syncDir makes a new directory entry durable; best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
