// Package clientip decides the address of the client behind a request: the connection's peer, or,
// when the peer is a trusted proxy (--trusted-proxies), the address that proxy reports in
// X-Forwarded-For. Logs, limits and anything else that keys on "who is asking" use the same Resolver.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver decides client addresses. The zero value (and nil) trusts no proxy: the peer address is the
// client, and X-Forwarded-For is ignored.
type Resolver struct {
	trusted []netip.Prefix
}

// Parse reads a comma-separated list of CIDR prefixes or single addresses ("10.0.0.0/8, 192.0.2.7").
// An empty list trusts no proxy.
func Parse(list string) (*Resolver, error) {
	r := &Resolver{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			r.trusted = append(r.trusted, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is neither an address nor a CIDR prefix (e.g. 10.0.0.0/8)", item)
		}
		a = a.Unmap()
		r.trusted = append(r.trusted, netip.PrefixFrom(a, a.BitLen()))
	}
	return r, nil
}

// Trusts reports whether addr is a trusted proxy.
func (r *Resolver) Trusts(addr netip.Addr) bool {
	if r == nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range r.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Addr returns the client address of req. When the peer is a trusted proxy, X-Forwarded-For is read
// from the right (each proxy appends the address it saw), skipping trusted proxies; the first address
// that is not one is the client. A malformed entry stops the walk at the last address known good, so
// that a client cannot hide behind a garbage value.
func (r *Resolver) Addr(req *http.Request) netip.Addr {
	peer := PeerAddr(req.RemoteAddr)
	if !peer.IsValid() || !r.Trusts(peer) {
		return peer
	}
	client := peer
	values := req.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[j]))
			if err != nil {
				return client
			}
			client = a.Unmap()
			if !r.Trusts(client) {
				return client
			}
		}
	}
	return client
}

// String returns the client address of req as text ("" when the peer address is unknown); it suits
// Echo's IPExtractor, so that c.RealIP() follows the same rules.
func (r *Resolver) String(req *http.Request) string {
	a := r.Addr(req)
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// Key is the address a limit counts against: the address itself for IPv4, its /64 for IPv6 (one
// subscriber usually holds a whole /64, so single IPv6 addresses cost nothing to rotate).
func (r *Resolver) Key(req *http.Request) string { return Key(r.Addr(req)) }

// Key is the limit key of an address (see Resolver.Key).
func Key(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// PeerAddr parses a "host:port" remote address (net/http's Request.RemoteAddr, net.Conn's
// RemoteAddr().String()); the zero Addr when it is not one.
func PeerAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}
