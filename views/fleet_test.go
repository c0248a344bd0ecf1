package views

import (
	"context"
	"strings"
	"testing"
)

// A model reading KV events shows each replica's KV-cache state in a column of its own; a model
// without them has no such column.
func TestFleetShowsKVStateOnlyWithKVEvents(t *testing.T) {
	render := func(signal string) string {
		p := FleetPage{Models: []FleetModel{{ID: "m", Routing: "affinity", CacheSignal: signal, Healthy: 2, Replicas: []FleetReplica{
			{Addr: "10.0.0.1:8000", Healthy: true, KV: "exact, 2 blocks"}, {Addr: "10.0.0.2:8000", Healthy: true}}}}}
		var b strings.Builder
		if err := FleetBody(p).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	html := render("kv-events")
	if !strings.Contains(html, ">KV cache</th>") || !strings.Contains(html, "exact, 2 blocks") || strings.Count(html, `data-testid="fleet-kv"`) != 2 {
		t.Errorf("kv-events: no KV cache column with each replica's state in:\n%s", html)
	}
	if html := render("routed"); strings.Contains(html, "KV cache") || strings.Contains(html, "fleet-kv") {
		t.Errorf("routed: a KV cache column in:\n%s", html)
	}
}
