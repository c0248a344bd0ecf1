// Package listen is the HTTP listener svc server and svc edge both serve on: the host dispatcher, the
// guard against slow and greedy clients, the server's timeouts, and metrics on a listener of their own.
package listen

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/handlers/edge"
	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/sse"
)

// Defaults of the listener's limits.
const (
	DefaultBodyReadTimeout = 60 * time.Second
	DefaultMaxConnsPerAddr = 256
	// maxHeaderBytes bounds request headers; Go answers 431 beyond it (plus 4 KiB of slack).
	maxHeaderBytes = 64 << 10
)

// NewHTTPServer is the listener setup shared by `svc server` and `svc edge`: an empty Host refused,
// bodies given bodyTimeout to arrive, headers 10 s and 64 KiB, idle connections closed after 2 min.
func NewHTTPServer(d http.Handler, bodyTimeout time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           requireHost(bodydeadline.Wrap(bodyTimeout, d)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if e, ok := c.(*envelopeConn); ok {
				return sse.WithBatcher(ctx, e)
			}
			return ctx
		},
	}
}

// ServeMetrics serves /metrics on a listener of its own (--metrics-addr).
func ServeMetrics(addr string, m *metrics.Metrics) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s for metrics: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr(), nil
}

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

// Protection of the one listener against slow and greedy clients, and errors in the API envelope for
// what Go's HTTP server answers by itself (docs/ARCHITECTURE.md, "Limits of the listener").

// requireHost answers requests whose Host is empty (HTTP/1.0 without one, or "Host:" with no value),
// which Go passes to handlers: neither the edge nor the API can tell what they were meant for.
func requireHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "" {
			w.Header().Set("Connection", "close")
			apierr.WriteAPI(w, edgemodel.CodeInvalidRequest, "the Host header is missing or empty; name the API or endpoint host the request is for")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guardedListener caps the connections open at once per client address and wraps each connection so
// that Go's own error answers leave in the API envelope. Trusted proxies are exempt from the cap: every
// client behind them shares their address.
type guardedListener struct {
	net.Listener
	perAddr int // 0: no cap
	proxies *clientip.Resolver

	mu   sync.Mutex
	open map[netip.Addr]int
}

func NewGuardedListener(ln net.Listener, perAddr int, proxies *clientip.Resolver) *guardedListener {
	return &guardedListener{Listener: ln, perAddr: perAddr, proxies: proxies, open: map[netip.Addr]int{}}
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientip.PeerAddr(c.RemoteAddr().String())
		if l.perAddr > 0 && !l.proxies.Trusts(addr) {
			l.mu.Lock()
			if l.open[addr] >= l.perAddr {
				l.mu.Unlock()
				go refuse(c)
				continue
			}
			l.open[addr]++
			l.mu.Unlock()
			return &envelopeConn{Conn: c, release: func() { l.release(addr) }}, nil
		}
		return &envelopeConn{Conn: c}, nil
	}
}

func (l *guardedListener) release(addr netip.Addr) {
	l.mu.Lock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
	l.mu.Unlock()
}

// refuse answers a connection over the cap and closes it, without reading its request.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, _ = c.Write(rawResponse(http.StatusTooManyRequests, "too_many_requests", "too many connections are open from this address; close some and retry", "Retry-After: 1\r\n"))
	c.Close()
}

// goError matches the answers net/http writes by itself, straight to the connection, when it cannot
// read a request (bad header, header too large, missing Host, unsupported version or transfer
// encoding): a status line followed by exactly these two headers. Answers of handlers always carry a
// Date header and sort Connection before Content-Type, so they never match.
var goError = regexp.MustCompile(`^HTTP/1\.1 (\d{3}) ([^\r\n]*)\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n`)

// envelopeConn rewrites Go's own error answers into the API's envelope.
type envelopeConn struct {
	net.Conn
	release func()
	once    sync.Once
	held    *[]byte // the writes held since Hold (a pooled buffer), nil when none are
}

var heldBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// Hold holds the writes that follow until Release (sse.Batcher). Only the goroutine that writes the
// connection's answers (HTTP/1's serving one) calls it.
func (c *envelopeConn) Hold() {
	if c.held == nil {
		c.held = heldBufs.Get().(*[]byte)
	}
}

// Release writes what was held, in one write.
func (c *envelopeConn) Release() error {
	b := c.held
	if b == nil {
		return nil
	}
	c.held = nil
	var err error
	if len(*b) > 0 {
		_, err = c.Conn.Write(*b)
	}
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		heldBufs.Put(b)
	}
	return err
}

func (c *envelopeConn) Write(p []byte) (int, error) {
	if c.held != nil {
		*c.held = append(*c.held, p...)
		return len(p), nil
	}
	// Go's own error answers are 4xx or 5xx, short, and written in one piece; the status digit is
	// checked first so that ordinary answers never reach the regular expression (a measurable cost on
	// the edge's hot path).
	if len(p) < 1024 && len(p) > 12 && (p[9] == '4' || p[9] == '5') && bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		if m := goError.FindSubmatch(p); m != nil {
			status, _ := strconv.Atoi(string(m[1]))
			code, msg := goErrorText(status, string(m[2]))
			if _, err := c.Conn.Write(rawResponse(status, code, msg, "")); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// goErrorText turns the reason of one of Go's error answers into a code and a message for people.
func goErrorText(status int, reason string) (code, message string) {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return "header_too_large", "the request headers are larger than the server accepts (" + strconv.Itoa(maxHeaderBytes>>10) + " KiB)"
	case http.StatusHTTPVersionNotSupported:
		return "http_version_not_supported", "the server speaks HTTP/1.0, HTTP/1.1 and HTTP/2 only"
	case http.StatusNotImplemented:
		return "not_implemented", "the request's Transfer-Encoding is not supported; send the body with Content-Length or chunked"
	}
	detail := "the request is not valid HTTP (a malformed request line or header, such as a control character in a header value)"
	if _, after, ok := bytes.Cut([]byte(reason), []byte(": ")); ok {
		detail = "the request is not valid HTTP: " + string(after)
	}
	return "invalid_request", detail
}

// rawResponse is a complete HTTP/1.1 answer in the API envelope that closes the connection.
func rawResponse(status int, code, message, extraHeaders string) []byte {
	body := apierr.API{Status: status, Code: code, Message: message}.JSON()
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n" + extraHeaders +
		"Connection: close\r\n\r\n" + string(body))
}

func (c *envelopeConn) Close() error {
	if c.release != nil {
		c.once.Do(c.release)
	}
	return c.Conn.Close()
}

// CloseWrite keeps net/http's graceful close after a 431 (it half-closes TCP connections).
func (c *envelopeConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
