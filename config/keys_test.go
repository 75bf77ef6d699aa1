package config

import (
	"errors"
	"strings"
	"testing"
)

// TestKeyErrors: an unknown key is named by its key path and line, with the nearest key
// of its mapping when one is close; a duration without a unit says how to write it. Every
// problem of the file is listed, not only the first.
func TestKeyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"case typo", "server:\n  maxbatch: 5\n", []string{`line 10: server.maxbatch: unknown key "maxbatch", did you mean "maxBatch"?`}},
		{"section typo", "servre: {}\n", []string{`line 9: servre: unknown key "servre", did you mean "server"?`}},
		{"deep typo", "upstreams:\n  chains:\n    - chainId: 1\n      url: [http://127.0.0.1:1/]\n", []string{
			`line 12: upstreams.chains[0].url: unknown key "url", did you mean "urls"?`}},
		{"inline struct", "rateLimit:\n  client: {rat: 5}\n", []string{`line 10: rateLimit.client.rat: unknown key "rat", did you mean "rate"?`}},
		{"map value", "rateLimit:\n  clients: [{clientId: a, costs: {eth_call: 2}, burts: 3}]\n", []string{
			`rateLimit.clients[0].burts: unknown key "burts", did you mean "burst"?`}},
		{"nothing near", "log: {colour: red}\n", []string{`line 9: log.colour: unknown key "colour" (the keys of log: flood, format, level, requests)`}},
		{"bare integer duration", "server:\n  readTimeout: 5\n", []string{`line 10: server.readTimeout: 5 is not a duration; write it with a unit, e.g. "5s"`}},
		{"quoted integer duration", "webhooks: {retention: '30'}\n", []string{`webhooks.retention: 30 is not a duration; write it with a unit, e.g. "30s"`}},
		{"float duration", "redis: {timeout: 1.5}\n", []string{`redis.timeout: 1.5 is not a duration; write it with a unit, e.g. "1.5s"`}},
		{"list for a duration", "redis: {timeout: [1]}\n", []string{`redis.timeout: must be a duration with a unit`}},
		{"every problem", "server: {maxbatch: 1, readTimeout: 2}\nlogg: {}\n", []string{
			`server.maxbatch: unknown key`, `server.readTimeout: 2 is not a duration`, `logg: unknown key "logg", did you mean "log"?`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal + tc.yaml))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v, want a *ValidationError", err)
			}
			if len(ve.Problems) != len(tc.want) {
				t.Errorf("%d problems, want %d: %q", len(ve.Problems), len(tc.want), ve.Problems)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestKeysAccepted: what the decoder takes passes the key check: durations with units, null,
// anchors and merge keys, the bump delay's own forms.
func TestKeysAccepted(t *testing.T) {
	c, err := Parse([]byte(minimal + `
server:
  readTimeout: 5s
  writeTimeout: ~
base: &b {rate: 7, burst: 9}
`))
	if err == nil || !strings.Contains(err.Error(), `base: unknown key "base"`) {
		t.Fatalf("an unknown top-level anchor holder: %v", err)
	}
	c, err = Parse([]byte(minimal + `
rateLimit:
  client: &b {rate: 7, burst: 9}
  principal: {<<: *b, burst: 11}
wallet: {transactions: {bump: {after: 3, chains: [{chainId: 1, after: 45s}]}}}
server: {readTimeout: 1m30s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimit.Principal.Rate != 7 || c.RateLimit.Principal.Burst != 11 || c.Server.ReadTimeout.String() != "1m30s" {
		t.Fatalf("decoded %+v %v", c.RateLimit.Principal, c.Server.ReadTimeout)
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"maxbatch", "maxbatch", 0}, {"flaw", "lawn", 2}} {
		if got := levenshtein(tc.a, tc.b); got != tc.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
