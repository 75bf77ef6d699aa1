package config

import (
	"bytes"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// notSecret are the keys whose names look like a secret's but whose values are not one:
// names of environment variables, paths of files, names of tokens, prefixes, sizes.
var notSecret = []string{
	"wallet.keys.passphraseEnv", "wallet.keys.passphraseFile", "store.tls.keyFile", "store.tls.certFile", "store.tls.caFile",
	"auth.oauth.signingKeyFile", "webhooks.endpoints[].secretEnv", "redis.keyPrefix", "rateLimit.maxKeys",
	"auth.oauth.admin.tokens[].name", "products.admin.tokens[].name", "webhooks.admin.tokens[].name", "admin.tokens[].name",
	"auth.oauth.tokenTtl", "wallet.pkcs11.tokenLabel", "wallet.awskms.keyAliasPrefix",
}

var secretLooking = regexp.MustCompile(`(?i)(url|dsn|sha256|pass|secret|token|key|gateway|cred|private|mnemonic|seed)[^.]*$`)

// leafPaths are the generic key paths of the values of t ("upstreams.chains[].urls[]"),
// with their types.
func leafPaths(t reflect.Type, path string, out map[string]reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType || reflect.PointerTo(t).Implements(unmarshalerType):
		out[path] = t
	case t.Kind() == reflect.Struct:
		for name, ft := range yamlKeys(t) {
			leafPaths(ft, joinPath(path, name), out)
		}
	case t.Kind() == reflect.Slice:
		leafPaths(t.Elem(), path+"[]", out)
	case t.Kind() == reflect.Map:
		leafPaths(t.Elem(), path+".*", out)
	default:
		out[path] = t
	}
}

// TestEverySecretKeyIsMasked: each key of secretKeys exists; each string key whose name
// looks like a secret is in secretKeys or notSecret; and a config with a secret in every
// key of secretKeys prints none of them.
func TestEverySecretKeyIsMasked(t *testing.T) {
	leaves := map[string]reflect.Type{}
	leafPaths(reflect.TypeFor[Config](), "", leaves)
	for key := range secretKeys {
		if leaves[key] == nil || leaves[key].Kind() != reflect.String {
			t.Errorf("secretKeys has %s, which is not a string key of Config", key)
		}
	}
	for _, key := range notSecret {
		if leaves[key] == nil {
			t.Errorf("notSecret has %s, which is not a key of Config", key)
		}
	}
	for key, typ := range leaves {
		_, listed := secretKeys[key]
		if typ.Kind() == reflect.String && secretLooking.MatchString(key) && !listed && !slices.Contains(notSecret, key) {
			t.Errorf("%s looks like a secret: list it in secretKeys (print.go) or notSecret", key)
		}
	}

	const canary = "Canary5ecret"
	hash := strings.Repeat("c4", 32)
	values := map[string]string{
		"store.dsn":                 "postgres://app:" + canary + "@db.internal:5432/web3gate?sslmode=require",
		"redis.url":                 "redis://default:" + canary + "@redis.internal:6379/0",
		"upstreams.chains[].urls[]": "https://mainnet.example/v3/" + canary,
		"webhooks.endpoints[].url":  "https://hooks.example/services/" + canary + "?token=" + canary,
		"auth.oauth.oidc[].jwksUrl": "https://user:" + canary + "@idp.example/jwks?key=" + canary,
		"metadata.ipfsGateways[]":   "https://ipfs.example/?token=" + canary,
		"metadata.arweaveGateway":   "https://ar.example/" + canary,
	}
	var c Config
	for key := range secretKeys {
		v, ok := values[key]
		if !ok {
			v = hash
		}
		setPath(t, reflect.ValueOf(&c).Elem(), strings.Split(key, "."), v)
	}
	var out bytes.Buffer
	if err := Print(&c, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), canary) || strings.Contains(out.String(), hash) {
		t.Fatalf("a secret is printed:\n%s", out.String())
	}
	for _, want := range []string{
		`dsn: "postgres://app:****@db.internal:5432/web3gate?sslmode=require"`, `url: "redis://default:****@redis.internal:6379/0"`,
		`- "https://mainnet.example/****"`, `jwksUrl: "https://user:****@idp.example/****"`, `sha256: "****"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the print lacks %s:\n%s", want, out.String())
		}
	}
}

// setPath sets the string at the generic key path (one element appended for each []).
func setPath(t *testing.T, v reflect.Value, path []string, s string) {
	t.Helper()
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	if len(path) == 0 {
		v.SetString(s)
		return
	}
	key, list := strings.CutSuffix(path[0], "[]")
	var f reflect.Value
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if name == key {
			f = v.Field(i)
		}
	}
	if !f.IsValid() {
		t.Fatalf("no key %s", key)
	}
	if !list {
		setPath(t, f, path[1:], s)
		return
	}
	if f.Len() == 0 {
		f.Set(reflect.Append(f, reflect.New(f.Type().Elem()).Elem()))
	}
	elem := f.Index(0)
	if strings.HasSuffix(path[len(path)-1], "[]") && len(path) == 1 {
		elem.SetString(s)
		return
	}
	setPath(t, elem, path[1:], s)
}

func TestMaskPassword(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:p%40ss@h/db":                   "postgres://u:****@h/db",
		"postgresql://u@h/db?password=x&sslmode=off": "postgresql://u@h/db?password=****&sslmode=off",
		"host=h user=u password=s3cret dbname=d":     "host=h user=u password=**** dbname=d",
		"host=h password='it\\'s a: # p' dbname=d":   "host=h password=**** dbname=d",
		"host=h password = 'a b' dbname=d":           "host=h password = **** dbname=d",
		"host=h user=u":                              "host=h user=u",
	} {
		if got := maskPassword(in); got != want {
			t.Errorf("maskPassword(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPrintLoadsBack: the unmasked print of the shipped config is a config file that loads
// to the same configuration (printed again, it is the same text).
func TestPrintLoadsBack(t *testing.T) {
	for _, src := range []string{"../config.yaml", "../deploy/web3gate.yaml"} {
		t.Run(src, func(t *testing.T) {
			for _, kv := range [][2]string{{"WEB3GATE_CLIENT_ID", "c1"}, {"WEB3GATE_TOKEN_SHA256", strings.Repeat("ab", 32)},
				{"WEB3GATE_UPSTREAM_URL", "https://node.example/rpc"}, {"WEB3GATE_STORE_DSN", "postgres://u:p@127.0.0.1/db"},
				{"WEB3GATE_REDIS_URL", "redis://127.0.0.1:6379/0"}, {"HOSTNAME", "replica-1"}} {
				t.Setenv(kv[0], kv[1])
			}
			c, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			c.Webhooks.Retention = new(time.Duration) // a pointer: 0s is kept apart from unset
			var first, second bytes.Buffer
			if err := printConfig(c, &first, false); err != nil {
				t.Fatal(err)
			}
			back, err := Parse(first.Bytes())
			if err != nil {
				t.Fatalf("the print does not load: %v\n%s", err, first.String())
			}
			if err := printConfig(back, &second, false); err != nil {
				t.Fatal(err)
			}
			if first.String() != second.String() {
				t.Fatalf("printed again, it differs:\n%s\n---\n%s", first.String(), second.String())
			}
		})
	}
}
