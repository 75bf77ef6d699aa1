package metadata

import (
	"strings"
	"testing"
	"time"
)

func TestFetcherConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  FetcherConfig
		want string
	}{
		{"allowNetworks", FetcherConfig{AllowNetworks: []string{"10.0.0.0/8", "nope"}}, `allowNetworks[1]: "nope" is not a CIDR prefix`},
		{"zone", FetcherConfig{AllowNetworks: []string{"fe80::1%eth0/64"}}, `allowNetworks[0]: `},
		{"maxBytes", FetcherConfig{MaxBytes: 10}, "maxBytes: must be between"},
		{"timeout", FetcherConfig{Timeout: time.Millisecond}, "timeout: must be at least 100ms"},
		{"maxRedirects high", FetcherConfig{MaxRedirects: 11}, "maxRedirects: must be between -1 (none) and 10"},
		{"maxRedirects low", FetcherConfig{MaxRedirects: -2}, "maxRedirects: must be between -1 (none) and 10"},
		{"dnsServer", FetcherConfig{DNSServer: "dns.example:53"}, `dnsServer: "dns.example:53" is not an ip:port`},
		{"userAgent", FetcherConfig{UserAgent: "a\r\nX-Evil: 1"}, "userAgent: must not contain control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.SetDefaults()
			err := cfg.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want prefix %q", err, tc.want)
			}
			if _, err := NewFetcher(tc.cfg); err == nil {
				t.Error("NewFetcher accepted the config")
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		var cfg FetcherConfig
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		want := FetcherConfig{MaxBytes: 1 << 20, Timeout: 10 * time.Second, MaxRedirects: 3, UserAgent: "web3gate-metadata/1"}
		if cfg.MaxBytes != want.MaxBytes || cfg.Timeout != want.Timeout || cfg.MaxRedirects != want.MaxRedirects || cfg.UserAgent != want.UserAgent {
			t.Errorf("defaults %+v, want %+v", cfg, want)
		}
	})
}
