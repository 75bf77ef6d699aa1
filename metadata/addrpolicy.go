package metadata

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrAddressNotAllowed is the cause of every refusal by the address policy: a metadata URI,
// or a redirect, led to an address that is not a public internet host (loopback, private
// networks, link-local, cloud metadata endpoints, ...). Test with errors.Is.
var ErrAddressNotAllowed = errors.New("destination address not allowed")

// blockedPrefix is one range of the address policy; name documents it and shows in tests.
type blockedPrefix struct {
	prefix netip.Prefix
	name   string
}

func bp(s, name string) blockedPrefix {
	return blockedPrefix{prefix: netip.MustParsePrefix(s), name: name}
}

// blocked4 are the IPv4 ranges that are not public internet hosts (IANA IPv4 special-purpose
// registry, RFC 6890 and successors) and the cloud metadata endpoints that lie in public space.
var blocked4 = []blockedPrefix{
	bp("0.0.0.0/8", "this network"),
	bp("10.0.0.0/8", "private (RFC 1918)"),
	bp("100.64.0.0/10", "shared address space (CGNAT)"),
	bp("100.100.100.200/32", "Alibaba Cloud metadata"),
	bp("127.0.0.0/8", "loopback"),
	bp("168.63.129.16/32", "Azure wire server"),
	bp("169.254.0.0/16", "link-local, cloud metadata"),
	bp("172.16.0.0/12", "private (RFC 1918)"),
	bp("192.0.0.0/24", "IETF protocol assignments"),
	bp("192.0.2.0/24", "documentation (TEST-NET-1)"),
	bp("192.88.99.0/24", "6to4 relay anycast"),
	bp("192.168.0.0/16", "private (RFC 1918)"),
	bp("198.18.0.0/15", "benchmarking"),
	bp("198.51.100.0/24", "documentation (TEST-NET-2)"),
	bp("203.0.113.0/24", "documentation (TEST-NET-3)"),
	bp("224.0.0.0/4", "multicast"),
	bp("240.0.0.0/4", "reserved, broadcast"),
}

// blocked6 are the IPv6 ranges refused outright. Besides them, an IPv6 address must be global
// unicast (2000::/3) unless it embeds an IPv4 address (see embedded4), which is then checked.
var blocked6 = []blockedPrefix{
	bp("::/128", "unspecified"),
	bp("::1/128", "loopback"),
	bp("64:ff9b:1::/48", "local-use NAT64"),
	bp("100::/64", "discard-only"),
	bp("2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID)"),
	bp("2001:db8::/32", "documentation"),
	bp("3fff::/20", "documentation"),
	bp("fc00::/7", "unique-local"),
	bp("fd00:ec2::254/128", "AWS metadata"),
	bp("fe80::/10", "link-local"),
	bp("fec0::/10", "site-local"),
	bp("ff00::/8", "multicast"),
}

var (
	global6 = netip.MustParsePrefix("2000::/3")
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	compat4 = netip.MustParsePrefix("::/96") // IPv4-compatible IPv6 (deprecated)
)

// addrPolicy decides which addresses the fetcher may connect to.
type addrPolicy struct {
	allow []netip.Prefix // exempt from the policy
}

// newAddrPolicy parses the allowNetworks entries: CIDR prefixes or single addresses.
func newAddrPolicy(allowNetworks []string) (addrPolicy, error) {
	var p addrPolicy
	for i, s := range allowNetworks {
		pr, err := parseNetwork(s)
		if err != nil {
			return addrPolicy{}, fmt.Errorf("allowNetworks[%d]: %w", i, err)
		}
		p.allow = append(p.allow, pr)
	}
	return p, nil
}

func parseNetwork(s string) (netip.Prefix, error) {
	if pr, err := netip.ParsePrefix(s); err == nil {
		if pr.Addr().Zone() != "" {
			return netip.Prefix{}, errors.New("must not have a zone")
		}
		return netip.PrefixFrom(pr.Addr().Unmap(), unmappedBits(pr)).Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix such as 10.0.0.0/8 or fd00::/8", s)
}

// unmappedBits is the prefix length of pr once an IPv4-mapped prefix is written as IPv4.
func unmappedBits(pr netip.Prefix) int {
	if pr.Addr().Is4In6() {
		return max(pr.Bits()-96, 0)
	}
	return pr.Bits()
}

// allowed reports whether the fetcher may connect to a.
func (p addrPolicy) allowed(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("").Unmap()
	for _, pr := range p.allow {
		if pr.Contains(a) {
			return true
		}
	}
	return publicAddr(a)
}

// publicAddr reports whether a (unmapped, without zone) is a public internet host.
func publicAddr(a netip.Addr) bool {
	if a.Is4() {
		for _, b := range blocked4 {
			if b.prefix.Contains(a) {
				return false
			}
		}
		return true
	}
	for _, b := range blocked6 {
		if b.prefix.Contains(a) {
			return false
		}
	}
	if v4, ok := embedded4(a); ok {
		return publicAddr(v4)
	}
	return global6.Contains(a)
}

// embedded4 returns the IPv4 address carried by an IPv4-compatible, NAT64 (64:ff9b::/96)
// or 6to4 (2002::/16) address.
func embedded4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a), compat4.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// control is the net.Dialer Control hook: it runs for every connection attempt, after name
// resolution and before connect, so the address checked is the one connected to.
func (p addrPolicy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !p.allowed(ap.Addr()) {
		return ErrAddressNotAllowed
	}
	return nil
}
