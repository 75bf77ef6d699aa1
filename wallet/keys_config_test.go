package wallet

import (
	"strings"
	"testing"
)

func TestKeysConfigSetDefaults(t *testing.T) {
	var c KeysConfig
	c.SetDefaults()
	want := KeysConfig{Backend: "dir", Dir: "keystore", PassphraseEnv: "WEB3GATE_KEYSTORE_PASSPHRASE"}
	if c != want {
		t.Fatalf("SetDefaults() = %+v, want %+v", c, want)
	}
}

func TestKeysConfigSetDefaultsKeepsSetFields(t *testing.T) {
	c := KeysConfig{Backend: "store", Dir: "/var/lib/web3gate/keys", PassphraseEnv: "KS_PASS", PassphraseFile: "/run/secrets/ks", LightScrypt: true}
	want := c
	c.SetDefaults()
	if c != want {
		t.Fatalf("SetDefaults() = %+v, want %+v", c, want)
	}
}

func TestKeysConfigValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		cfg  KeysConfig
	}{
		{"defaults", KeysConfig{Backend: "dir", Dir: "keystore", PassphraseEnv: DefaultPassphraseEnv}},
		{"backend store", KeysConfig{Backend: "store", Dir: "keystore", PassphraseEnv: DefaultPassphraseEnv}},
		{"one letter", KeysConfig{Backend: "dir", Dir: "k", PassphraseEnv: "P"}},
		{"underscore first, digits later", KeysConfig{Backend: "dir", Dir: "k", PassphraseEnv: "_PASS_2"}},
		{"lower case", KeysConfig{Backend: "dir", Dir: "k", PassphraseEnv: "ks_pass"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestKeysConfigValidateRejects(t *testing.T) {
	const envMsg = "passphraseEnv: must be the name of an environment variable " +
		"(letters, digits and _, not starting with a digit), not the passphrase itself"
	tests := []struct {
		name string
		cfg  KeysConfig
		want []string // one line of the joined error each, in order
	}{
		{"no dir", KeysConfig{Backend: "dir", PassphraseEnv: "P"}, []string{"dir: must not be empty"}},
		{"unknown backend", KeysConfig{Backend: "postgres", Dir: "k", PassphraseEnv: "P"}, []string{`backend: must be "dir" or "store", got "postgres"`}},
		{"backend in upper case", KeysConfig{Backend: "Store", Dir: "k", PassphraseEnv: "P"}, []string{`backend: must be "dir" or "store", got "Store"`}},
		{"no env name", KeysConfig{Backend: "dir", Dir: "k"}, []string{envMsg}},
		{"env name with a space", KeysConfig{Backend: "dir", Dir: "k", PassphraseEnv: "my secret pass"}, []string{envMsg}},
		{"env name starting with a digit", KeysConfig{Backend: "dir", Dir: "k", PassphraseEnv: "1PASS"}, []string{envMsg}},
		{"env name with a dollar", KeysConfig{Backend: "dir", Dir: "k", PassphraseEnv: "$PASS"}, []string{envMsg}},
		{"everything unset", KeysConfig{}, []string{`backend: must be "dir" or "store", got ""`, "dir: must not be empty", envMsg}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}
