//go:build linux

// The shipped config.yaml with a run's own store, keystore and JWT key (signing, products, (w)).

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// signConfig is the shipped config.yaml as devConfig makes it, with its state (store,
// keystore, JWT signing key) in dir, the wallet.transactions settings and the extra keys
// (full paths: a key backend's).
func signConfig(root, dir string, settings [][2]string, extra ...[2]string) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		raw, err := os.ReadFile(filepath.Join(root, "config.yaml"))
		if err != nil {
			return "", err
		}
		out, err := signConfigBytes(raw, api, admin, dir, settings, extra...)
		if err != nil {
			return "", fmt.Errorf("config.yaml: %w", err)
		}
		path := filepath.Join(dir, "web3gate.yaml")
		return path, os.WriteFile(path, out, 0o600)
	}
}

func signConfigBytes(raw []byte, api, admin int, dir string, settings [][2]string, extra ...[2]string) ([]byte, error) {
	out, err := devConfigBytes(raw, api, admin)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, err
	}
	sets := [][2]string{
		{"store.path", filepath.Join(dir, "web3gate.db")},
		{"wallet.keys.dir", filepath.Join(dir, "keystore")},
		{"auth.oauth.signingKeyFile", filepath.Join(dir, "jwt-signing-key.pem")},
	}
	for _, s := range settings {
		sets = append(sets, [2]string{"wallet.transactions." + s[0], s[1]})
	}
	for _, s := range sets {
		if err := setYAML(&doc, s[0], s[1]); err != nil {
			return nil, err
		}
	}
	for _, s := range extra {
		if err := putYAML(&doc, s[0], s[1]); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(&doc)
}
