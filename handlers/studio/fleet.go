package studio

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// fleetList is GET /api/fleet, the Fleet page (docs/API.md, "Studio loopback routes"): the catalog's
// models that have replicas, with their state as the server's edge sees it. ?part=body answers the
// tables alone, which the page asks for every 3 seconds.
func (s *Server) fleetList(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.readClient(ctx)
	if err != nil {
		return err
	}
	models, err := cl.ListModels(ctx)
	if err != nil {
		return err
	}
	withFleet := []cloudapi.Model{}
	var page views.FleetPage
	for _, m := range models {
		if m.Fleet != nil {
			withFleet = append(withFleet, m)
			page.Models = append(page.Models, fleetView(m))
		}
	}
	var fragment = views.FleetView(page)
	if c.QueryParam("part") == "body" {
		fragment = views.FleetBody(page)
	}
	return render(c, http.StatusOK, fragment, modelsBody{Models: withFleet})
}

func fleetView(m cloudapi.Model) views.FleetModel {
	f := m.Fleet
	out := views.FleetModel{ID: m.ID, Routing: f.Routing, CacheSignal: f.CacheSignal, MaxLoras: f.MaxLoras}
	for _, r := range f.Replicas {
		v := views.FleetReplica{Addr: r.Addr, Healthy: r.State == cloudapi.ReplicaHealthy, OutReason: r.OutReason,
			InFlight: r.InFlight, Waiting: r.Waiting, Ejections: r.Ejections, Adapters: r.Adapters, Resident: r.ResidentAdapters, Unready: r.UnreadyAdapters}
		if v.Healthy {
			out.Healthy++
		}
		if r.KV != nil {
			v.KV = fmt.Sprintf("%s, %d blocks", r.KV.State, r.KV.Blocks)
		}
		if r.OutUntil != nil {
			v.OutUntil = r.OutUntil.UTC().Format("15:04:05")
		}
		if r.Pace > 0 {
			v.Pace, v.MeanCall = fmt.Sprintf("%.1f×", r.Pace), fmt.Sprintf("%d ms", r.MeanCallMs)
		}
		out.Replicas = append(out.Replicas, v)
	}
	return out
}
