package edgesync

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// failover sends the edge's requests to one of several replicas of the control plane (svc edge
// --control-plane URL1,URL2; docs/DEPLOY.md, "Replicas on PostgreSQL"): the one in use while it
// answers; when it cannot be reached, or answers 502, 503 or 504 (a proxy in front of a replica that
// is gone), the same request goes to the next one, each replica at most once, and the edge stays with
// the first that answers. Every request the Client sends may be sent twice: snapshots and the feed are
// reads, and run batches are applied once by their id. With one URL it is the plain transport.
type failover struct {
	bases []string // base URLs, without a trailing slash; requests are built on bases[0]
	cur   atomic.Int32
	next  http.RoundTripper
}

func newFailover(bases []string, next http.RoundTripper) http.RoundTripper {
	if len(bases) == 1 {
		return next
	}
	return &failover{bases: bases, next: next}
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	rest := strings.TrimPrefix(req.URL.String(), f.bases[0])
	for attempt := 0; ; attempt++ {
		i := int(f.cur.Load())
		try, err := f.request(req, i, rest, attempt > 0)
		if err != nil {
			return nil, err
		}
		resp, err := f.next.RoundTrip(try)
		if err == nil && !gatewayFailure(resp.StatusCode) {
			return resp, nil
		}
		// This replica failed: the next request (and this one, if it may be sent again) goes to the next.
		f.cur.CompareAndSwap(int32(i), int32((i+1)%len(f.bases)))
		if attempt == len(f.bases)-1 || req.Context().Err() != nil || !replayable(req) {
			return resp, err // the caller reads a 5xx as "unreachable"
		}
		if err == nil {
			resp.Body.Close()
		}
	}
}

// request returns req addressed to replica i, with its body again when it is sent again.
func (f *failover) request(req *http.Request, i int, rest string, again bool) (*http.Request, error) {
	if i == 0 && !again {
		return req, nil
	}
	u, err := url.Parse(f.bases[i] + rest)
	if err != nil {
		return nil, err
	}
	try := req.Clone(req.Context())
	try.URL, try.Host = u, ""
	if again && req.GetBody != nil {
		if try.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return try, nil
}

func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func gatewayFailure(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// CloseIdleConnections passes on to the transport (Client.Close).
func (f *failover) CloseIdleConnections() {
	if c, ok := f.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
