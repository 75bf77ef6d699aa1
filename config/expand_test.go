package config

import (
	"strings"
	"testing"
)

// TestEnvValuesKeepTheirBytes: a value from the environment is put in after parsing, so
// quotes, a # or ": " in a password reach the config as they are, in a plain, a quoted and
// a flow value alike.
func TestEnvValuesKeepTheirBytes(t *testing.T) {
	const pass = `p"a#ss: w'o}rd # not a comment`
	t.Setenv("W3G_TEST_PG_PASSWORD", pass)
	t.Setenv("W3G_TEST_CHAIN", "1")
	t.Setenv("W3G_TEST_TRUE", "true")
	for _, tc := range []struct{ name, yaml string }{
		{"plain", "metadata:\n  fetcher:\n    userAgent: agent ${W3G_TEST_PG_PASSWORD} end\n"},
		{"double quoted", "metadata:\n  fetcher:\n    userAgent: \"agent ${W3G_TEST_PG_PASSWORD} end\"\n"},
		{"single quoted", "metadata:\n  fetcher:\n    userAgent: 'agent ${W3G_TEST_PG_PASSWORD} end'\n"},
		{"flow", "metadata: {fetcher: {userAgent: agent ${W3G_TEST_PG_PASSWORD} end}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := strings.Replace(minimal, "mainnet: 1", "mainnet: ${W3G_TEST_CHAIN}", 1) + tc.yaml + "cache: {enabled: ${W3G_TEST_TRUE}}\n"
			c, err := Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if want := "agent " + pass + " end"; c.Metadata.Fetcher.UserAgent != want {
				t.Fatalf("userAgent %q, want %q", c.Metadata.Fetcher.UserAgent, want)
			}
			if c.Upstreams.Mainnet != 1 || !c.Cache.Enabled {
				t.Fatalf("a plain value is typed from its expansion: mainnet %d, cache.enabled %v", c.Upstreams.Mainnet, c.Cache.Enabled)
			}
		})
	}
}

// TestEnvExpansionRules: defaults, several references in one value, flow sequences,
// comments never read, a quoted number stays a string, and an unset variable is an error
// naming each key and line.
func TestEnvExpansionRules(t *testing.T) {
	t.Setenv("W3G_TEST_HOST", "127.0.0.1")
	t.Setenv("W3G_TEST_PORT", "7")
	t.Setenv("W3G_TEST_EMPTY", "")
	c, err := Parse([]byte(strings.Replace(minimal, "urls: [http://127.0.0.1:1/]", "urls: [http://${W3G_TEST_HOST}:${W3G_TEST_PORT}/, 'http://${W3G_TEST_HOST}:${W3G_TEST_UNSET_X:-8}/']", 1) +
		"log: {level: \"${W3G_TEST_EMPTY:-warn}${W3G_TEST_EMPTY}\"} # ${W3G_TEST_UNSET_IN_COMMENT}\n# ${W3G_TEST_UNSET_IN_COMMENT}\n" +
		"wallet: {devPrincipal: '${W3G_TEST_PORT}'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Upstreams.Chains[0].URLs; len(u) != 2 || u[0] != "http://127.0.0.1:7/" || u[1] != "http://127.0.0.1:8/" {
		t.Fatalf("urls %q", u)
	}
	// An empty variable is set: no default.
	if c.Log.Level != "info" || c.Wallet.DevPrincipal != "7" {
		t.Fatalf("log.level %q (empty, then defaulted), devPrincipal %q", c.Log.Level, c.Wallet.DevPrincipal)
	}
	_, err = Parse([]byte(minimal + "log: {level: ${W3G_TEST_UNSET_A}}\nstore:\n  dsn: x${W3G_TEST_UNSET_B}\n"))
	for _, want := range []string{"line 9: log.level: environment variable W3G_TEST_UNSET_A is not set", "line 11: store.dsn: environment variable W3G_TEST_UNSET_B is not set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestPlaceholderPrefixCollision: a file that already holds the placeholder text keeps it.
func TestPlaceholderPrefixCollision(t *testing.T) {
	t.Setenv("W3G_TEST_LEVEL", "warn")
	c, err := Parse([]byte(minimal + "log: {level: ${W3G_TEST_LEVEL}}\ncluster: {leaseNamespace: __web3gate_env_0_}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.Level != "warn" || c.Cluster.LeaseNamespace != "__web3gate_env_0_" {
		t.Fatalf("level %q, namespace %q", c.Log.Level, c.Cluster.LeaseNamespace)
	}
}
