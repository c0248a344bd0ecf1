package listen

import (
	"net/http"
	"strings"

	"github.com/svcdev/svc/handlers/edge"
)

// Dispatcher sends <slug>.<domain> hosts and the path form /e/<slug>/... to the edge, /internal/... to
// the internal API of edge processes (when there is one), and everything else to the management API
// (in an edge process: its operating routes).
type Dispatcher struct {
	Domain   string // lower case, with a port when the domain has one
	Edge     *edge.Handler
	Internal http.Handler // nil: no internal API here
	API      http.Handler
}

func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if slug, ok := d.slugFromHost(r.Host); ok {
		d.Edge.ServeEdge(w, r, slug)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/e/"); ok {
		slug, path, _ := strings.Cut(rest, "/")
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = "/"+path, ""
		r2.URL = &u
		d.Edge.ServeEdge(w, r2, slug)
		return
	}
	// Served beside Echo, not through it: the change feed streams for hours (never buffered by the
	// API's gzip) and run batches are larger than the API's body cap.
	if d.Internal != nil && strings.HasPrefix(r.URL.Path, "/internal/") {
		d.Internal.ServeHTTP(w, r)
		return
	}
	d.API.ServeHTTP(w, r)
}

// slugFromHost returns the slug of a <slug>.<domain> host. The port is compared only when the domain
// names one, so that a domain behind a proxy on :443 matches whatever port the proxy reports. A fully
// qualified name ends in a dot ("demo.example.com."), which DNS and TLS treat as the same name: the dot
// is dropped. It allocates nothing (it runs on every request).
func (d *Dispatcher) slugFromHost(host string) (string, bool) {
	host = strings.ToLower(host)
	name, port := splitPort(host)
	domain, domainPort := splitPort(d.Domain)
	if domainPort != "" && port != domainPort {
		return "", false
	}
	rest, ok := strings.CutSuffix(strings.TrimSuffix(name, "."), domain)
	if !ok || !strings.HasSuffix(rest, ".") {
		return "", false
	}
	slug := rest[:len(rest)-1]
	if slug == "" || strings.Contains(slug, ".") {
		return "", false
	}
	return slug, true
}

// splitPort cuts ":port" off a host name (the colons of a bracketed IPv6 literal stay).
func splitPort(host string) (name, port string) {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.IndexByte(host[i:], ']') >= 0 {
		return host, ""
	}
	return host[:i], host[i:]
}
