package metrics

import "github.com/prometheus/client_golang/prometheus"

// ShadowStats are the counts of an edge's shadow copies (docs/API.md, "Canary"; OPERATIONS.md).
type ShadowStats interface {
	ShadowQueued() int64  // copies of calls queued for a shadow canary
	ShadowDropped() int64 // copies dropped: the queue was full, or the process stopped before they were answered
}

// WatchShadows exports the shadow copies' counts: svc_edge_shadow_copies_total and
// svc_edge_shadow_dropped_total. A second call (another edge handler on the same registry) is a no-op.
func (m *Metrics) WatchShadows(s ShadowStats) {
	if m == nil {
		return
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_edge_shadow_copies_total",
			Help: "Copies of calls queued for a deployment's shadow canary."}, func() float64 { return float64(s.ShadowQueued()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_edge_shadow_dropped_total",
			Help: "Copies of calls for a shadow canary dropped: the shadow queue was full, a copy gave its place back to a caller, or the process stopped before the canary answered them."}, func() float64 { return float64(s.ShadowDropped()) }),
	} {
		_ = m.reg.Register(c)
	}
}
