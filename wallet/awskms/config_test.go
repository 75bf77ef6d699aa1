package awskms

import (
	"context"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestConfigYAMLAndDefaults(t *testing.T) {
	var c Config
	src := `
enabled: true
region: eu-west-1
endpoint: https://vpce-123.kms.eu-west-1.vpce.amazonaws.com
signTimeout: 2s
maxConcurrentSigns: 16
maxAttempts: 3
keyAliasPrefix: web3gate/prod-
tags: {team: payments}
`
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.Enabled || c.Region != "eu-west-1" || c.SignTimeout != 2*time.Second || c.MaxConcurrentSigns != 16 ||
		c.MaxAttempts != 3 || c.KeyAliasPrefix != "web3gate/prod-" || c.Tags["team"] != "payments" {
		t.Fatalf("decoded %+v", c)
	}
	var d Config
	d.SetDefaults()
	if d.Enabled || d.SignTimeout != DefaultSignTimeout || d.MaxConcurrentSigns != DefaultMaxConcurrentSigns || d.MaxAttempts != DefaultMaxAttempts {
		t.Fatalf("defaults %+v", d)
	}
}

func TestConfigValidate(t *testing.T) {
	off := Config{SignTimeout: -1}
	if err := off.Validate(); err != nil {
		t.Fatalf("a disabled backend is not checked: %v", err)
	}
	for _, tc := range []struct {
		mutate func(*Config)
		key    string
	}{
		{func(c *Config) { c.Endpoint = "127.0.0.1:8080" }, "endpoint:"},
		{func(c *Config) { c.SignTimeout = -time.Second }, "signTimeout:"},
		{func(c *Config) { c.MaxConcurrentSigns = -1 }, "maxConcurrentSigns:"},
		{func(c *Config) { c.MaxAttempts = 11 }, "maxAttempts:"},
		{func(c *Config) { c.KeyAliasPrefix = "bad prefix" }, "keyAliasPrefix:"},
		{func(c *Config) { c.KeyAliasPrefix = "aws/x" }, "keyAliasPrefix:"},
		{func(c *Config) { c.Tags = map[string]string{labelTag: "x"} }, "tags:"},
		{func(c *Config) { c.Tags = map[string]string{"": "x"} }, "tags:"},
	} {
		c := Config{Enabled: true}
		c.SetDefaults()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%+v: %v, want an error naming %s", c, err, tc.key)
		}
	}
}

// New needs a region and credentials from the chain, and says which is missing.
func TestNewNeedsRegionAndCredentials(t *testing.T) {
	none := t.TempDir() + "/none"
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_ACCESS_KEY_ID": "AKIATEST", "AWS_SECRET_ACCESS_KEY": "secret-not-to-be-shown",
	} {
		t.Setenv(k, v)
	}
	cfg := Config{Enabled: true}
	cfg.SetDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := New(ctx, cfg, nil); err == nil || !strings.Contains(err.Error(), "region") {
		t.Fatalf("no region: %v", err)
	}
	cfg.Region = "eu-west-1"
	b, err := New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err = New(ctx, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Fatalf("no credentials: %v", err)
	}
	if _, err := New(ctx, Config{Enabled: true}, nil); err == nil || !strings.Contains(err.Error(), "signTimeout") {
		t.Fatalf("no defaults: %v", err)
	}
}
