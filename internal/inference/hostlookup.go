package inference

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"
)

// hostLookup resolves the host name of a model's replicas (`replicas: {dns}` for the picker,
// `loraTargets: dns` for adapter loading): each lookup bounded in time, a failure logged when a run of
// them begins and the recovery when it ends, so that a name that stays unresolvable logs once, not
// every interval. Safe for concurrent use.
type hostLookup struct {
	host    string
	lookup  func(ctx context.Context, host string) ([]string, error)
	timeout time.Duration
	log     *slog.Logger
	failing atomic.Bool
}

// newHostLookup looks host up with lookup (the system resolver when nil), at most timeout a lookup.
func newHostLookup(host string, lookup func(context.Context, string) ([]string, error), timeout time.Duration, log *slog.Logger) *hostLookup {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	if log == nil {
		log = slog.Default()
	}
	return &hostLookup{host: host, lookup: lookup, timeout: timeout, log: log}
}

// addrs returns the host's addresses, sorted and without duplicates. A failed lookup, or one with no
// address, returns the error: callers keep the replicas they knew.
func (h *hostLookup) addrs(ctx context.Context) ([]string, error) {
	lctx, cancel := context.WithTimeout(ctx, h.timeout)
	addrs, err := h.lookup(lctx, h.host)
	cancel()
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		if !h.failing.Swap(true) {
			h.log.Warn("replicas: the name does not resolve; keeping the replicas known so far", "host", h.host, "err", err)
		}
		return nil, err
	}
	if h.failing.Swap(false) {
		h.log.Info("replicas: the name resolves again", "host", h.host, "addresses", len(addrs))
	}
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}
