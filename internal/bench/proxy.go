package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// ProxyStatsPath answers the bare proxy's body counters (ProxyStats) instead of being proxied.
const ProxyStatsPath = "/_svcbench/proxy-stats"

// ProxyStats is what the bare proxy saw of the request bodies it streamed through to the upstream.
type ProxyStats struct {
	Requests     int64 `json:"requests"`
	EarlyAnswers int64 `json:"earlyAnswers"` // the upstream's answer began before the Transport was done with the body
	LateReads    int64 `json:"lateReads"`    // body reads after the proxy's handler had returned
	ReadErrors   int64 `json:"readErrors"`   // body reads that failed (other than io.EOF)
}

type proxyCounters struct{ requests, early, late, readErrors atomic.Int64 }

// BareProxy is the baseline: a default httputil.ReverseProxy to target, as a Go developer would write
// one.
//
// FlushInterval is left at 0 (ReverseProxy flushes text/event-stream answers at once by itself), and
// the request body is streamed through to the upstream, not buffered. The proxy's one change is its
// transport: a copy of http.DefaultTransport that keeps up to 512 idle connections per host. The
// default keeps 2, so at 16 connections the proxy would dial the mock again for most requests and be
// handicapped against the edge, whose upstream transport keeps 512 (internal/inference/openai.go).
//
// Streaming the body runs into golang/go#40747, and the bench saw it happen (Go 1.26): without the
// fix below, 2 to 9 of every 5,000 to 9,500 requests hit it, and the first streamed one to do so ended
// the bench ("ReverseProxy read error during body copy: use of closed network connection", a cut
// answer). The bench's bodies are small and complete, but not in the Transport's eyes: the inbound
// body is no in-memory reader, so the Transport flushes the headers first, then copies the body
// straight to the socket (its write buffer is empty, so bufio hands the copy to the connection), and
// only then reads the body once more, to check that it is at its end. In between, the mock can read the
// request and answer, ReverseProxy starts the answer, and Go's HTTP/1 server, which does not let a
// handler read a request body once its answer has begun, consumes and closes the inbound body. The
// Transport's last read then fails ("http: invalid Read on closed Body"), and the Transport closes the
// upstream connection, under the answer being streamed.
//
// The fix keeps the body streamed: http.ResponseController.EnableFullDuplex (Go 1.21, golang/go#57786)
// tells the server that the handler reads the body while it answers, so the server leaves the body
// alone until the handler returns. watchedBody and watchTransport check what happens
// rather than assume it: they count answers that began before the Transport was done with the body
// (the window, which harms no one now), body reads after the handler returned and body read errors
// (both expected 0), and the bench prints them at the end. A failure would also show loudly: the client
// would see a cut answer and the bench would stop with an error.
func BareProxy(target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 512 // the only tuning; see above
	c := &proxyCounters{}
	p.Transport = watchTransport{tr, c}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ProxyStatsPath {
			json.NewEncoder(w).Encode(ProxyStats{Requests: c.requests.Load(), EarlyAnswers: c.early.Load(),
				LateReads: c.late.Load(), ReadErrors: c.readErrors.Load()})
			return
		}
		c.requests.Add(1)
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		b := &watchedBody{ReadCloser: r.Body, c: c}
		r.Body = b
		p.ServeHTTP(w, r)
		b.returned.Store(true)
	}), nil
}

// watchedBody passes an inbound request body through unchanged, counting reads that come too late or
// fail.
type watchedBody struct {
	io.ReadCloser
	c        *proxyCounters
	returned atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.returned.Load() {
		b.c.late.Add(1)
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.c.readErrors.Add(1)
	}
	return n, err
}

// watchTransport counts answers that began before the Transport had written the whole request (its
// last read of the body included).
type watchTransport struct {
	http.RoundTripper
	c *proxyCounters
}

func (t watchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		GotFirstResponseByte: func() {
			if !wrote.Load() {
				t.c.early.Add(1)
			}
		},
	}
	return t.RoundTripper.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}
