package edgesync

import (
	"github.com/prometheus/client_golang/prometheus"
)

// stats are the edge's own metrics of its link to the control plane (docs/OPERATIONS.md, "Metrics").
type stats struct {
	connected   prometheus.Gauge
	fetches     *prometheus.CounterVec
	changes     prometheus.Counter
	staleServed prometheus.Counter
}

func newStats() *stats {
	return &stats{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "svc_edge_sync_connected",
			Help: "1 while the change feed from the control plane is open, else 0."}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_edge_sync_snapshot_fetches_total",
			Help: "Snapshot fetches from the control plane, by result (ok, not_found, unreachable)."}, []string{"result"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_changes_total",
			Help: "Changes received on the change feed."}),
		staleServed: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_stale_served_total",
			Help: "Requests served from a snapshot the control plane could not confirm (within --max-stale)."}),
	}
}

func (s *stats) fetched(snap *snapshot, err error) {
	switch {
	case err != nil:
		s.fetches.WithLabelValues("unreachable").Inc()
	case !snap.serves():
		s.fetches.WithLabelValues("not_found").Inc()
	default:
		s.fetches.WithLabelValues("ok").Inc()
	}
}

// Register exports the cache's metrics on reg.
func (c *Cache) Register(reg prometheus.Registerer) {
	reg.MustRegister(c.stats.connected, c.stats.fetches, c.stats.changes, c.stats.staleServed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_edge_sync_last_contact_age_seconds",
			Help: "Seconds since the control plane last answered (-1: never)."}, func() float64 {
			st := c.Status()
			if st.LastContact.IsZero() {
				return -1
			}
			return c.o.Now().Sub(st.LastContact).Seconds()
		}))
}
