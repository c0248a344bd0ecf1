package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdev/svc/internal/fleet"
)

// FleetStats are the replicas' states of the models with replicas, by model (inference.Registry).
type FleetStats interface {
	FleetStates() map[string][]fleet.State
}

// WatchFleets exports each replica of each model with replicas (docs/LORA.md, "Fleets"): its
// health, its calls in flight from this process, the queue its /metrics reported, its picks by reason,
// its ejections, and the calls held in svc for its adapter slots. The series are read from the pickers when scraped, so they cost the request path
// nothing; a replica that leaves (replicas: {dns}) leaves the series.
func (m *Metrics) WatchFleets(f FleetStats) {
	m.reg.MustRegister(&fleetCollector{f: f})
}

var (
	fleetHealthy = prometheus.NewDesc("svc_fleet_replica_healthy",
		"1 while the replica takes calls, 0 while it is ejected (passive failures; GET /health takes it back).", []string{"model", "replica"}, nil)
	fleetInFlight = prometheus.NewDesc("svc_fleet_replica_in_flight",
		"Calls this process has in flight on the replica.", []string{"model", "replica"}, nil)
	fleetWaiting = prometheus.NewDesc("svc_fleet_replica_waiting",
		"Requests waiting on the replica, as its /metrics (vllm:num_requests_waiting) last said.", []string{"model", "replica"}, nil)
	fleetPicks = prometheus.NewDesc("svc_fleet_picks_total",
		"Calls sent to the replica, by the rule that chose it (affinity, lora, load, hash, retry, round-robin).", []string{"model", "replica", "reason"}, nil)
	fleetEjections = prometheus.NewDesc("svc_fleet_replica_ejections_total",
		"Times the replica was taken out after a failure before the answer's first byte.", []string{"model", "replica"}, nil)
	fleetHeld = prometheus.NewDesc("svc_fleet_held_total",
		"Calls sent to the replica after svc held them until one of its adapter slots freed (routing affinity).", []string{"model", "replica"}, nil)
	fleetHeldSeconds = prometheus.NewDesc("svc_fleet_held_seconds_total",
		"Time those calls were held in svc, in seconds.", []string{"model", "replica"}, nil)
	fleetKVPicks = prometheus.NewDesc("svc_fleet_kv_picks_total",
		"Conversation turns sent to the replica of a model with kvEvents, by what placed them: the replicas' KV events (kv-events) or, where those did not know, the routed chains (routed).", []string{"model", "replica", "signal"}, nil)
	fleetKVBlocks = prometheus.NewDesc("svc_fleet_replica_kv_blocks",
		"KV-cache blocks svc's index holds for the replica from its KV events, labelled with the index's state of it (quiet, exact, partial, unknown).", []string{"model", "replica", "state"}, nil)
	fleetCallSeconds = prometheus.NewDesc("svc_fleet_replica_call_seconds",
		"Moving mean of how long the replica's calls from this process took, pick to end (0 before one ended): its pace against the others' weighs its queue.", []string{"model", "replica"}, nil)
)

type fleetCollector struct{ f FleetStats }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fleetHealthy, fleetInFlight, fleetWaiting, fleetPicks, fleetEjections, fleetHeld, fleetHeldSeconds, fleetCallSeconds, fleetKVPicks, fleetKVBlocks} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	for model, states := range c.f.FleetStates() {
		for _, s := range states {
			healthy := 0.0
			if s.Healthy {
				healthy = 1
			}
			ch <- prometheus.MustNewConstMetric(fleetHealthy, prometheus.GaugeValue, healthy, model, s.Addr)
			ch <- prometheus.MustNewConstMetric(fleetInFlight, prometheus.GaugeValue, float64(s.InFlight), model, s.Addr)
			ch <- prometheus.MustNewConstMetric(fleetWaiting, prometheus.GaugeValue, float64(s.Waiting), model, s.Addr)
			ch <- prometheus.MustNewConstMetric(fleetEjections, prometheus.CounterValue, float64(s.Ejections), model, s.Addr)
			ch <- prometheus.MustNewConstMetric(fleetHeld, prometheus.CounterValue, float64(s.Held), model, s.Addr)
			ch <- prometheus.MustNewConstMetric(fleetHeldSeconds, prometheus.CounterValue, s.HeldFor.Seconds(), model, s.Addr)
			ch <- prometheus.MustNewConstMetric(fleetCallSeconds, prometheus.GaugeValue, s.MeanCall.Seconds(), model, s.Addr)
			if s.KV.State != "" {
				ch <- prometheus.MustNewConstMetric(fleetKVPicks, prometheus.CounterValue, float64(s.KVPicks), model, s.Addr, "kv-events")
				ch <- prometheus.MustNewConstMetric(fleetKVPicks, prometheus.CounterValue, float64(s.KVRouted), model, s.Addr, "routed")
				ch <- prometheus.MustNewConstMetric(fleetKVBlocks, prometheus.GaugeValue, float64(s.KV.Blocks), model, s.Addr, s.KV.State)
			}
			for _, reason := range fleet.Reasons() {
				ch <- prometheus.MustNewConstMetric(fleetPicks, prometheus.CounterValue, float64(s.PicksBy(reason)), model, s.Addr, reason.String())
			}
		}
	}
}
