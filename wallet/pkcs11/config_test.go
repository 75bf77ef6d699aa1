package pkcs11

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	var off Config
	off.SetDefaults()
	if err := off.Validate(); err != nil || off.Enabled() {
		t.Fatalf("no module: %v", err)
	}
	c := Config{Module: "/lib/p.so", TokenLabel: "t"}
	c.SetDefaults()
	if c.PINEnv != DefaultPINEnv || c.Sessions != 8 || c.SignTimeout != 5*time.Second || c.LabelPrefix != "web3gate" {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	slot := uint(3)
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.TokenLabel = "" }, "tokenLabel: must be set"},
		{func(c *Config) { c.Slot = &slot }, "tokenLabel, slot"},
		{func(c *Config) { c.TokenLabel = strings.Repeat("x", 33) }, "tokenLabel: at most 32"},
		{func(c *Config) { c.PINEnv = "1234-secret" }, "pinEnv:"},
		{func(c *Config) { c.Sessions = -1 }, "sessions:"},
		{func(c *Config) { c.SignTimeout = -time.Second }, "signTimeout:"},
	} {
		bad := c
		tc.edit(&bad)
		err := bad.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
		if err != nil && strings.Contains(err.Error(), "1234-secret") {
			t.Errorf("the message repeats pinEnv's value: %v", err)
		}
	}
	bySlot := Config{Module: "/lib/p.so", Slot: &slot}
	bySlot.SetDefaults()
	if err := bySlot.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestPINRedacted(t *testing.T) {
	p := &pin{"s3cret"}
	for _, f := range []string{"%v", "%+v", "%s", "%#v", "%q"} {
		if s := fmtSprintf(f, p); strings.Contains(s, "s3cret") {
			t.Fatalf("%s prints the PIN: %s", f, s)
		}
	}
}
