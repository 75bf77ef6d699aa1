package netpolicy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestPolicyRefuses(t *testing.T) {
	p, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "169.254.170.2", "100.64.0.1", "100.127.255.255", "100.100.100.200",
		"168.63.129.16", "0.0.0.0", "0.1.2.3", "255.255.255.255", "240.0.0.1", "224.0.0.251",
		"239.255.255.250", "192.0.0.192", "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.18.0.1",
		"198.19.255.255", "192.88.99.1",
		"::", "::1", "fe80::1", "fe80::1%eth0", "fc00::1", "fd00::1", "fd00:ec2::254", "fec0::1",
		"ff02::1", "ff05::1:3", "2001:db8::1", "3fff::1", "100::1", "2001::1", "2001:2::1",
		"64:ff9b:1::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
		"::127.0.0.1", "::10.0.0.1", "::169.254.169.254",
		"64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::10.1.2.3",
		"2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:0a00:0001::",
		"::2:3:4:5", "4000::1", "e000::1", // outside global unicast 2000::/3
	} {
		t.Run(s, func(t *testing.T) {
			if p.Allowed(netip.MustParseAddr(s)) {
				t.Errorf("%s allowed", s)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		if p.Allowed(netip.Addr{}) {
			t.Error("the zero Addr is allowed")
		}
	})
}

func TestPolicyAllowsPublic(t *testing.T) {
	p, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"1.1.1.1", "8.8.8.8", "93.184.215.14", "100.63.255.255", "100.128.0.0", "172.32.0.1",
		"169.253.255.255", "168.63.129.17", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001::200e", "2001:4860:4860::8888", "2001:200::1", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8",
		"2002:0808:0808::1",
	} {
		t.Run(s, func(t *testing.T) {
			if !p.Allowed(netip.MustParseAddr(s)) {
				t.Errorf("%s refused", s)
			}
		})
	}
}

func TestPolicyAllowNetworks(t *testing.T) {
	p, err := New([]string{"127.0.0.0/8", "fd00:1::/32", "10.1.2.3", "::ffff:192.168.0.0/112"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true},
		{"::ffff:127.0.0.5", true},
		{"fd00:1::5", true},
		{"fd00:2::5", false},
		{"10.1.2.3", true},
		{"10.1.2.4", false},
		{"192.168.3.4", true},
		{"169.254.169.254", false},
		{"::1", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if got := p.Allowed(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Errorf("allowed(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

func TestPolicyControl(t *testing.T) {
	p, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		address string
		refused bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:443", true},
		{"[fe80::1%lo]:80", true},
		{"not an address", true},
		{"8.8.8.8:443", false},
		{"[2606:4700:4700::1111]:443", false},
	} {
		t.Run(tc.address, func(t *testing.T) {
			err := p.Control("tcp", tc.address, nil)
			if got := errors.Is(err, ErrAddressNotAllowed); got != tc.refused {
				t.Errorf("control(%s) = %v, want refused %v", tc.address, err, tc.refused)
			}
		})
	}
}

func TestPolicyAllowedHost(t *testing.T) {
	strict, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	loopback, err := New([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host           string
		strict, looped bool
	}{
		{"127.0.0.1", false, true},
		{"[::1]", false, false},
		{"localhost", false, true},
		{"api.localhost.", false, true},
		{"10.0.0.1", false, false},
		{"8.8.8.8", true, true},
		{"hooks.example.com", true, true}, // a name: left to Control at connect time
	} {
		t.Run(tc.host, func(t *testing.T) {
			if got := strict.AllowedHost(tc.host); got != tc.strict {
				t.Errorf("strict: AllowedHost(%s) = %v, want %v", tc.host, got, tc.strict)
			}
			if got := loopback.AllowedHost(tc.host); got != tc.looped {
				t.Errorf("loopback allowed: AllowedHost(%s) = %v, want %v", tc.host, got, tc.looped)
			}
		})
	}
}
