//go:build linux

package main

import "testing"

func TestRedisFlagAndHelpers(t *testing.T) {
	if o, err := parseFlags([]string{"-only", "redis"}); err != nil || o.only != "redis" {
		t.Errorf("-only redis: %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-only", "redis", "-forwarder"}); err == nil {
		t.Error("-only redis -forwarder accepted")
	}
	if got := jsonField([]byte(`{"number":"0x0","hash":"0xabc","parentHash":"0x0"}`), "hash"); got != "0xabc" {
		t.Errorf("jsonField: %q", got)
	}
	if got := jsonField([]byte(`{"number":"0x0"}`), "hash"); got != "" {
		t.Errorf("jsonField of an absent member: %q", got)
	}
}
