package proxy

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strings"
)

// parsePrefix reads a trusted proxy: a CIDR, or an IP address (a prefix of its full length).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		bits := p.Bits() - unmappedBits(p.Addr())
		if bits < 0 {
			return netip.Prefix{}, errors.New("an IPv4-mapped prefix shorter than /96")
		}
		return netip.PrefixFrom(p.Addr().Unmap(), bits).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// unmappedBits is what a prefix of an IPv4-mapped IPv6 address loses when unmapped.
func unmappedBits(a netip.Addr) int {
	if a.Is4In6() {
		return 96
	}
	return 0
}

// trustedPrefixes compiles validated server.trustedProxies.
func trustedPrefixes(list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func trustedAddr(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the IP address of a TCP peer (IPv4-mapped addresses unmapped); invalid when
// addr is not a TCP address.
func peerAddr(addr net.Addr) netip.Addr {
	if ta, ok := addr.(*net.TCPAddr); ok {
		a, _ := netip.AddrFromSlice(ta.IP)
		return a.Unmap()
	}
	if addr == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ForwardedFor is the source address of a request from peer with the X-Forwarded-For header
// values xff (in the order received): peer itself unless peer is a trusted proxy; else the
// right-most address of the list (the headers joined by commas) that is not a trusted proxy,
// which the nearest trusted proxy saw. The entries left of it are the client's to write and
// are never used. An entry that is not an IP address ends the walk: the trusted proxy to its
// right is the source (a request is then limited as its proxy is). When every entry is
// trusted, the left-most is the source.
func ForwardedFor(peer netip.Addr, trusted []netip.Prefix, xff [][]byte) netip.Addr {
	if len(trusted) == 0 || !peer.IsValid() || !trustedAddr(peer, trusted) {
		return peer
	}
	src := peer
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for len(v) > 0 {
			var item []byte
			if j := bytes.LastIndexByte(v, ','); j >= 0 {
				item, v = v[j+1:], v[:j]
			} else {
				item, v = v, nil
			}
			item = bytes.TrimSpace(item)
			if len(item) == 0 {
				continue
			}
			a, err := netip.ParseAddr(string(item))
			if err != nil {
				// "[2001:db8::1]:443" or "1.2.3.4:80": proxies that add the port.
				ap, perr := netip.ParseAddrPort(string(item))
				if perr != nil {
					return src
				}
				a = ap.Addr()
			}
			a = a.Unmap()
			if !trustedAddr(a, trusted) {
				return a
			}
			src = a
		}
	}
	return src
}
