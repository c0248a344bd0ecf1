package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/fleet"
)

type fleetStats map[string][]fleet.State

func (f fleetStats) FleetStates() map[string][]fleet.State { return f }

// A model with kvEvents exports its turns placed by the events and by the routed chains, and the
// blocks svc holds for each replica with the index's state of it; a model without exports neither.
func TestFleetKVSeries(t *testing.T) {
	m := New()
	m.WatchFleets(fleetStats{
		"kv":    {{Addr: "10.0.0.1:8000", Healthy: true, KV: fleet.KVState{State: "partial", Blocks: 160}, KVPicks: 7, KVRouted: 2}},
		"plain": {{Addr: "10.0.0.2:8000", Healthy: true}},
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`svc_fleet_kv_picks_total{model="kv",replica="10.0.0.1:8000",signal="kv-events"} 7`,
		`svc_fleet_kv_picks_total{model="kv",replica="10.0.0.1:8000",signal="routed"} 2`,
		`svc_fleet_replica_kv_blocks{model="kv",replica="10.0.0.1:8000",state="partial"} 160`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(out, `kv_picks_total{model="plain"`) || strings.Contains(out, `kv_blocks{model="plain"`) {
		t.Error("a model without kvEvents exports KV series")
	}
}
