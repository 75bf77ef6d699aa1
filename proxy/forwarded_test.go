package proxy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestForwardedFor(t *testing.T) {
	trusted := trustedPrefixes([]string{"10.0.0.0/8", "192.168.1.7", "fd00::/8"})
	tests := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer: XFF ignored", "203.0.113.9", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer, no XFF", "10.1.2.3", nil, "10.1.2.3"},
		{"one proxy", "10.1.2.3", []string{"198.51.100.4"}, "198.51.100.4"},
		{"client-written entries left of it are not used", "10.1.2.3", []string{"6.6.6.6, 198.51.100.4"}, "198.51.100.4"},
		{"a chain of trusted proxies", "10.1.2.3", []string{"198.51.100.4, 10.9.9.9", "192.168.1.7"}, "198.51.100.4"},
		{"every entry trusted: the left-most", "10.1.2.3", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"garbage ends the walk at the proxy", "10.1.2.3", []string{"198.51.100.4, bogus, 10.0.0.2"}, "10.0.0.2"},
		{"ports", "10.1.2.3", []string{"198.51.100.4:5555"}, "198.51.100.4"},
		{"IPv6", "fd00::1", []string{"2001:db8::7"}, "2001:db8::7"},
		{"IPv6 with port", "fd00::1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"mapped IPv4", "10.1.2.3", []string{"::ffff:198.51.100.4"}, "198.51.100.4"},
		{"empty items", "10.1.2.3", []string{" , 198.51.100.4 ,"}, "198.51.100.4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var xff [][]byte
			for _, v := range tc.xff {
				xff = append(xff, []byte(v))
			}
			got := ForwardedFor(netip.MustParseAddr(tc.peer), trusted, xff)
			if got != netip.MustParseAddr(tc.want) {
				t.Fatalf("%v, want %s", got, tc.want)
			}
		})
	}
	if got := ForwardedFor(netip.MustParseAddr("10.1.2.3"), nil, [][]byte{[]byte("1.2.3.4")}); got != netip.MustParseAddr("10.1.2.3") {
		t.Fatalf("no trusted proxies: %v", got)
	}
}

func TestTrustedProxiesValidated(t *testing.T) {
	var c Config
	c.SetDefaults()
	c.TrustedProxies = []string{"10.0.0.0/8", "::1", "10.0.0.0/33", "proxy.example"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "trustedProxies[2]") || !strings.Contains(err.Error(), "trustedProxies[3]") || strings.Contains(err.Error(), "trustedProxies[1]") {
		t.Fatalf("%v", err)
	}
}
