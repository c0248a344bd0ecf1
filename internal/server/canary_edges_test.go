package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgeproc"
)

// A split canary on two svc edge processes, which never talk to each other: every session is answered
// by the same arm on both, their shipped runs record the arm, and a promote reaches both through the
// change feed.
func TestCanarySessionsLandOnTheSameArmOnEveryEdge(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	a, b := c.edge("", nil), c.edge("", nil)
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "canaried", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen3-8b"},
		Percent: 30, Mode: cloudapi.CanarySplit}); err != nil {
		t.Fatal(err)
	}
	model := func(r answer) string {
		t.Helper()
		var m struct{ Model string }
		if r.status != 200 || json.Unmarshal([]byte(r.body), &m) != nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return m.Model
	}
	const sessions = 60
	canary := 0
	for i := range sessions {
		content := fmt.Sprintf("the opening of session %d", i) // no user, no header: the opening keys it
		onA, onB := model(call(t, a, "canaried", "", content)), model(call(t, b, "canaried", "", content))
		if onA != onB {
			t.Fatalf("session %d: edge a answered with %s, edge b with %s", i, onA, onB)
		}
		if onA == "sim-qwen3-8b" {
			canary++
		}
	}
	if canary == 0 || canary == sessions {
		t.Fatalf("%d of %d sessions on the canary", canary, sessions)
	}
	// The runs the edges shipped say which arm answered.
	arms := map[string]int{}
	for _, r := range c.runsWhen(d.ID, func(rs []cloudapi.RunSummary) bool { return len(rs) == 2*sessions }) {
		if want := map[string]string{"sim-llama-3.1-8b-instruct": cloudapi.ArmPrimary, "sim-qwen3-8b": cloudapi.ArmCanary}[r.Model]; r.Arm != want || r.ArmTarget != r.Model {
			t.Fatalf("shipped run %s of %s records arm %q target %q", r.ID, r.Model, r.Arm, r.ArmTarget)
		}
		arms[r.Arm]++
	}
	if arms[cloudapi.ArmCanary] != 2*canary {
		t.Fatalf("runs by arm %v, want %d on the canary", arms, 2*canary)
	}

	// Promote: both edges serve the canary's target to every session within a second.
	if _, err := c.sdk.PromoteCanary(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for model(call(t, a, "canaried", "", "after the promote")) != "sim-qwen3-8b" || model(call(t, b, "canaried", "", "after the promote")) != "sim-qwen3-8b" {
		if time.Now().After(deadline) {
			t.Fatal("the edges still answer with the old target 2 s after the promote")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range sessions {
		content := fmt.Sprintf("the opening of session %d", i)
		if onA, onB := model(call(t, a, "canaried", "", content)), model(call(t, b, "canaried", "", content)); onA != "sim-qwen3-8b" || onB != onA {
			t.Fatalf("session %d after the promote: %s on edge a, %s on edge b", i, onA, onB)
		}
	}
}

// Promoting a canary while calls flow through two svc edge processes fails none of them, and the edges
// take the new target from the change feed: every call begun 1.5 s after the promote is answered by
// it, and its run records it, with no arm.
func TestPromoteWhileTrafficFlowsThroughEdges(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	edges := []*edgeproc.Edge{c.edge("", nil), c.edge("", nil)}
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "promoted", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"}, RunRetentionMode: "days", RunRetentionDays: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen3-8b"},
		Percent: 50, Mode: cloudapi.CanarySplit}); err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		within(t, e, "promoted", "", 200, 5*time.Second, "the endpoint")
	}
	type result struct {
		edge   int
		start  time.Time
		model  string
		status int
		body   string
	}
	var mu sync.Mutex
	var results []result
	var stop atomic.Bool
	var wg sync.WaitGroup
	for ei, e := range edges {
		for w := range 2 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					start := time.Now()
					a := call(t, e, "promoted", "", fmt.Sprintf("edge %d worker %d call %d", ei, w, i))
					var m struct{ Model string }
					json.Unmarshal([]byte(a.body), &m)
					mu.Lock()
					results = append(results, result{ei, start, m.Model, a.status, a.body})
					mu.Unlock()
				}
			})
		}
	}
	time.Sleep(300 * time.Millisecond) // on purpose: the promote lands while traffic flows
	if _, err := c.sdk.PromoteCanary(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	settled := time.Now().Add(1500 * time.Millisecond) // the edges take the change within about a second
	time.Sleep(2500 * time.Millisecond)                // on purpose: traffic goes on a second past settled
	stop.Store(true)
	wg.Wait()
	before, late := map[string]int{}, [2]int{}
	for _, r := range results {
		if r.status != 200 {
			t.Fatalf("edge %d: a call failed during the promote: %d %s", r.edge, r.status, r.body)
		}
		if r.start.Before(settled) {
			before[r.model]++
			continue
		}
		late[r.edge]++
		if r.model != "sim-qwen3-8b" {
			t.Fatalf("edge %d answered a call begun %v after the promote with %s", r.edge, r.start.Sub(settled)+1500*time.Millisecond, r.model)
		}
	}
	if before["sim-llama-3.1-8b-instruct"] == 0 || before["sim-qwen3-8b"] == 0 || late[0] == 0 || late[1] == 0 {
		t.Fatalf("calls before the promote settled by model %v, after it by edge %v", before, late)
	}
	// The runs of the calls begun after it, as the edges shipped them, record the new target and no arm.
	after := func(rs []cloudapi.RunSummary) []cloudapi.RunSummary {
		return slices.DeleteFunc(slices.Clone(rs), func(r cloudapi.RunSummary) bool { return !r.CreatedAt.After(settled) })
	}
	shipped := c.runsWhen(d.ID, func(rs []cloudapi.RunSummary) bool { return len(after(rs)) >= late[0]+late[1] })
	for _, r := range after(shipped) {
		if r.Model != "sim-qwen3-8b" || r.Arm != "" || r.ArmTarget != "" {
			t.Fatalf("a run after the promote: model %s arm %q target %q", r.Model, r.Arm, r.ArmTarget)
		}
	}
}

// runsWhen waits up to 10 s for the runs of a deployment that the edges shipped (its latest 200) to
// satisfy ok, and returns them; the test fails when they do not.
func (c *cluster) runsWhen(deploymentID string, ok func([]cloudapi.RunSummary) bool) []cloudapi.RunSummary {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := c.sdk.ListRuns(context.Background(), deploymentID, cloudapi.ListRunsOptions{Limit: 200})
		if err != nil {
			c.t.Fatal(err)
		}
		if ok(page.Runs) {
			return page.Runs
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after 10 s, the %d runs shipped are not those awaited", len(page.Runs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
