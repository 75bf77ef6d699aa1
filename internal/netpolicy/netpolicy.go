// Package netpolicy decides which addresses web3gate may connect to on behalf of URLs that
// someone else chose: metadata URIs published by contract deployers, webhook endpoints
// registered through the admin API. Only public internet hosts are allowed unless a network
// is exempted (allowNetworks); the check runs in the dialer's Control hook, after name
// resolution and before connect, so the address checked is the one connected to (no DNS
// rebinding window).
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

// ErrAddressNotAllowed is the cause of every refusal by the policy: a URL, or a redirect, led
// to an address that is not a public internet host (loopback, private
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

// Policy decides which addresses a client may connect to. The zero Policy allows public
// internet hosts only.
type Policy struct {
	allow []netip.Prefix // exempt from the policy
}

// New parses the allowNetworks entries: CIDR prefixes or single addresses exempt from the
// policy. Errors name the entry ("allowNetworks[1]: ...").
func New(allowNetworks []string) (Policy, error) {
	var p Policy
	for i, s := range allowNetworks {
		pr, err := parseNetwork(s)
		if err != nil {
			return Policy{}, fmt.Errorf("allowNetworks[%d]: %w", i, err)
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

// AllowedHost reports whether host, the host of a URL, may be connected to as far as can be
// told without resolving it: a literal address is checked, and "localhost" (RFC 6761: always
// loopback) is checked as 127.0.0.1; any other name is left to Control at connect time. It
// lets a configured or registered URL be refused early with a clear error.
func (p Policy) AllowedHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return p.Allowed(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return true
	}
	return p.Allowed(a)
}

// unmappedBits is the prefix length of pr once an IPv4-mapped prefix is written as IPv4.
func unmappedBits(pr netip.Prefix) int {
	if pr.Addr().Is4In6() {
		return max(pr.Bits()-96, 0)
	}
	return pr.Bits()
}

// Allowed reports whether a client may connect to a.
func (p Policy) Allowed(a netip.Addr) bool {
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

// Control is the net.Dialer Control hook: it runs for every connection attempt, after name
// resolution and before connect, so the address checked is the one connected to.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !p.Allowed(ap.Addr()) {
		return ErrAddressNotAllowed
	}
	return nil
}
