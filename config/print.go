package config

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Masked is what Print writes in place of a secret.
const Masked = "****"

// secretKeys are the keys whose values can hold a secret, with how Print masks each. The
// file itself never holds a passphrase, a private key or a webhook secret (they come from
// the environment or files it names), but connection strings and URLs carry passwords and
// API keys, and the token hashes identify tokens. TestEverySecretKeyIsMasked keeps the list
// complete: a new key whose name looks like a secret fails it until it is listed here or
// in notSecret.
var secretKeys = map[string]func(string) string{
	"store.dsn":                        maskPassword,
	"redis.url":                        maskPassword,
	"upstreams.chains[].urls[]":        maskURL,
	"upstreams.chains[].wsUrls[]":      maskURL,
	"webhooks.endpoints[].url":         maskURL,
	"auth.oauth.oidc[].jwksUrl":        maskURL,
	"metadata.ipfsGateways[]":          maskURL,
	"metadata.arweaveGateway":          maskURL,
	"auth.tokens[].sha256":             maskAll,
	"auth.oauth.admin.tokens[].sha256": maskAll,
	"products.admin.tokens[].sha256":   maskAll,
	"webhooks.admin.tokens[].sha256":   maskAll,
	"admin.tokens[].sha256":            maskAll,
}

// Print writes c as YAML, each secret masked: `web3gate config print`, the effective
// configuration with every default applied.
func Print(c *Config, w io.Writer) error {
	return printConfig(c, w, true)
}

func printConfig(c *Config, w io.Writer, mask bool) error {
	var n yaml.Node
	if err := n.Encode(c); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if mask {
		walkNodes(&n, "", func(n *yaml.Node, path string) {
			if f, ok := secretKeys[genericPath(path)]; ok && n.Kind == yaml.ScalarNode && n.Value != "" {
				n.Value, n.Style, n.Tag = f(n.Value), yaml.DoubleQuotedStyle, "!!str"
			}
		})
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return enc.Close()
}

var indexRE = regexp.MustCompile(`\[[0-9]+\]`)

// genericPath is path with every index removed: "upstreams.chains[].urls[]".
func genericPath(path string) string { return indexRE.ReplaceAllString(path, "[]") }

func maskAll(string) string { return Masked }

// maskURL keeps a URL's scheme and host (and user name) and masks its password, path and
// query, where API keys go (https://mainnet.example/v3/KEY). A value that is not a URL with
// a host is masked whole, but for the upstream "embedded".
func maskURL(s string) string {
	if s == "embedded" {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return Masked
	}
	out := u.Scheme + "://"
	if u.User != nil {
		out += u.User.Username()
		if _, ok := u.User.Password(); ok {
			out += ":" + Masked
		}
		out += "@"
	}
	out += u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return out + "/" + Masked
	}
	return out + u.Path
}

var dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:\\.|[^'\\])*'|\S*)`)

// maskPassword masks the password of a connection string: a URL
// (postgres://user:PASSWORD@host/db?password=..., redis://:PASSWORD@host/0) or PostgreSQL
// key=value pairs (password=...).
func maskPassword(s string) string {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return Masked
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Masked)
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", Masked)
			u.RawQuery = q.Encode()
		}
		return strings.Replace(u.String(), url.QueryEscape(Masked), Masked, -1)
	}
	return dsnPassword.ReplaceAllString(s, "${1}"+Masked)
}
