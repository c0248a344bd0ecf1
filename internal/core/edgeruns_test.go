package core

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
)

// The edge reads a stored run by the id its caller got: the run's own, svc's response id made of it, or
// the upstream's id of a passed-through Responses answer (previous_response_id of a chain the upstream
// keeps, which a split canary reads back to the chain's first request on every edge); only of its own
// deployment, and not once expired.
func TestEdgeRunByTheIDsCallersGot(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	_, mine, theirs := mineAndTheirs(t, s)
	for _, r := range []dbsqlc.RunCreateParams{
		{ID: "run_0000000000000passed", Request: `{"input":"first"}`, Response: `{"id":"resp_upstream7f3a"}`, UpstreamResponseID: "resp_upstream7f3a"},
		{ID: "run_00000000000000owned", Request: `{"input":"own"}`, Response: `{"id":"resp_00000000000000owned"}`},
		{ID: "run_0000000000000expired", Request: `{"input":"old"}`, Response: `{}`, UpstreamResponseID: "resp_upstreamold",
			ExpiresAt: sql.NullInt64{Int64: ms(now.Add(-time.Minute)), Valid: true}},
	} {
		r.DeploymentID, r.Model, r.Status, r.LatencyMs, r.CreatedAt = mine.ID, "m", "ok", 1, ms(now.Add(-time.Hour))
		if err := s.q.RunCreate(ctx, s.db, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ deployment, id, want string }{
		{mine.ID, "resp_upstream7f3a", `{"input":"first"}`},
		{mine.ID, "run_0000000000000passed", `{"input":"first"}`},
		{mine.ID, "resp_00000000000000owned", `{"input":"own"}`},
		{mine.ID, "run_00000000000000owned", `{"input":"own"}`},
		{theirs.ID, "resp_upstream7f3a", ""},
		{theirs.ID, "resp_00000000000000owned", ""},
		{mine.ID, "resp_upstreamold", ""},
		{mine.ID, "resp_unknown", ""},
		{mine.ID, "not an id", ""},
	} {
		req, _, err := s.EdgeRun(ctx, c.deployment, c.id)
		switch {
		case c.want == "" && edgemodel.CodeOf(err) != edgemodel.CodeNotFound:
			t.Errorf("%s of %s: %q, %v; want not found", c.id, c.deployment, req, err)
		case c.want != "" && (err != nil || string(req) != c.want):
			t.Errorf("%s of %s: %q, %v; want %s", c.id, c.deployment, req, err, c.want)
		}
	}
}
