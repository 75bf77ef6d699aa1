package config

import (
	"strings"
	"testing"
)

func TestWalletConfigValidate(t *testing.T) {
	c := WalletConfig{}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	c.DevPrincipal = " "
	c.Keys.Dir = ""
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"devPrincipal: must not be empty", "keys.dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
