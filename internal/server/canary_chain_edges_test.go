package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/mockupstream"
)

// passModels: two models whose upstream (the mock at %s) serves the Responses API, so that the edge
// passes Responses calls through and the caller gets the upstream's response ids.
const passModels = `models:
  - name: pass-a
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    supportsResponses: true
    public: true
    default: true
  - name: pass-b
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    supportsResponses: true
    public: true
`

// A split canary keeps a chain passed through to a Responses upstream on its arm across svc edge
// processes: a turn continued on another edge than the one that answered the turn before (once its run
// is shipped) reads the chain back through the control plane by the upstream's id, as svc server does;
// feedback on such an id sent to an edge that never saw it finds its run the same way.
func TestPassedThroughChainsKeepTheirArmAcrossEdges(t *testing.T) {
	up := httptest.NewServer(mockupstream.New(mockupstream.Config{Tokens: 4, ServeResponses: true}, true))
	t.Cleanup(up.Close)
	models := modelsFile(t, passModels, up.URL)
	c := newCluster(t, func(cfg *Config) { cfg.ModelsFile = models })
	withModels := func(cfg *edgeproc.Config) { cfg.ModelsFile = models }
	a, b := c.edge("", withModels), c.edge("", withModels)
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "pass-split", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "pass-a"}, RunRetentionMode: "days", RunRetentionDays: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "pass-b"},
		Percent: 30, Mode: cloudapi.CanarySplit}); err != nil {
		t.Fatal(err)
	}
	within(t, a, "pass-split", "", 200, 5*time.Second, "the endpoint on edge a")
	within(t, b, "pass-split", "", 200, 5*time.Second, "the endpoint on edge b")
	const chains = 30
	canary := 0
	var firstIDs []string
	for i := range chains {
		first := respond(t, a, "pass-split", map[string]any{"input": fmt.Sprintf("chain %d opens", i)})
		firstIDs = append(firstIDs, first.ID)
		c.runsWhen(d.ID, func(rs []cloudapi.RunSummary) bool { // edge a's run of it is stored
			return slices.ContainsFunc(rs, func(r cloudapi.RunSummary) bool { return r.UpstreamResponseID == first.ID })
		})
		next := respond(t, b, "pass-split", map[string]any{"input": "go on", "previous_response_id": first.ID})
		if first.Model != next.Model {
			t.Fatalf("chain %d: %s answered its first turn on edge a, %s its second on edge b", i, first.Model, next.Model)
		}
		if first.Model == "pass-b" {
			canary++
		}
	}
	if canary == 0 || canary == chains {
		t.Fatalf("%d of %d chains on the 30%% canary", canary, chains)
	}
	t.Logf("%d of %d passed-through chains on the canary", canary, chains)
	// Feedback on edge b on an answer edge a passed through: edge b never saw the upstream's id, and the
	// control plane finds its run by it.
	if st, body := feedbackOn(t, b, "pass-split", "", firstIDs[0], -1); st != 200 {
		t.Fatalf("feedback on another edge's passed-through answer: %d %s", st, body)
	}
	page, err := c.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	scored := slices.IndexFunc(page.Runs, func(r cloudapi.RunSummary) bool { return r.UpstreamResponseID == firstIDs[0] })
	if scored < 0 || page.Runs[scored].Feedback == nil || page.Runs[scored].Feedback.Score != -1 {
		t.Fatalf("the run of %s after feedback on edge b: %+v", firstIDs[0], page.Runs[max(scored, 0)])
	}
}

// respond posts a Responses call to slug on edge e and returns the answer's upstream id and model.
func respond(t *testing.T, e *edgeproc.Edge, slug string, body map[string]any) (r struct{ ID, Model string }) {
	t.Helper()
	addr := e.Addr.String()
	client := edgeClient(addr)
	b, _ := json.Marshal(body)
	resp, err := client.Post("http://"+slug+"."+edgeDomain+"/v1/responses", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(raw, &r) != nil || !strings.HasPrefix(r.ID, "resp_mock") {
		t.Fatalf("edge %s: %d %s (want a passed-through response)", addr, resp.StatusCode, raw)
	}
	return r
}
