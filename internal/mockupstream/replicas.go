package mockupstream

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
)

// Replica is a mock upstream on its own listener: one inference server of a pool, as a Kubernetes
// Deployment's pods or the replicas behind an inference gateway are.
type Replica struct {
	*Server
	// Addr is the listener's host:port; URL its OpenAI base URL (http://Addr/v1).
	Addr string
	URL  string

	srv *http.Server
}

// StartReplica serves a new mock with cfg on ln until Close.
func StartReplica(ln net.Listener, cfg Config) *Replica {
	r := &Replica{Server: New(cfg, true), Addr: ln.Addr().String()}
	r.URL = "http://" + r.Addr + "/v1"
	r.srv = &http.Server{Handler: r.Server}
	go r.srv.Serve(ln)
	return r
}

// Close stops the replica and drops its connections.
func (r *Replica) Close() { r.srv.Close() }

// ListenSamePort listens on one TCP port shared by every given IP, as the pods of a headless Service
// share the container port. Any loopback address works on Linux (127.0.0.0/8); on systems where only
// 127.0.0.1 is configured the error says so and callers skip.
func ListenSamePort(ips ...string) ([]net.Listener, error) {
	if len(ips) == 0 {
		return nil, errors.New("no addresses")
	}
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		first, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", ips[0], err)
		}
		port := fmt.Sprint(first.Addr().(*net.TCPAddr).Port)
		lns := []net.Listener{first}
		for _, ip := range ips[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
			if err != nil {
				last = err
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(ips) {
			return lns, nil
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	return nil, fmt.Errorf("no port free on all of %v: %w", ips, last)
}

// RoundRobin is a load balancer in front of replicas, as a Kubernetes Service or an inference gateway
// is: each request goes to the next backend in turn, so a call meant for "the upstream" reaches one
// replica only.
type RoundRobin struct {
	mu       sync.Mutex
	backends []*url.URL
	next     atomic.Uint64
}

// NewRoundRobin balances over the given base URLs (scheme and host are used; paths pass through).
func NewRoundRobin(backends ...string) *RoundRobin {
	rr := &RoundRobin{}
	rr.SetBackends(backends...)
	return rr
}

// SetBackends replaces the backends, as replicas join or leave.
func (rr *RoundRobin) SetBackends(backends ...string) {
	us := make([]*url.URL, 0, len(backends))
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			panic(err)
		}
		us = append(us, u)
	}
	rr.mu.Lock()
	rr.backends = us
	rr.mu.Unlock()
}

func (rr *RoundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rr.mu.Lock()
	bs := rr.backends
	rr.mu.Unlock()
	if len(bs) == 0 {
		vllmError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "no backends")
		return
	}
	target := bs[(rr.next.Add(1)-1)%uint64(len(bs))]
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host },
		FlushInterval: -1,
	}
	proxy.ServeHTTP(w, r)
}
