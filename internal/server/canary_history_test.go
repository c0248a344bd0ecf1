package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// A canary's history through an svc edge process, whose shipped runs the control plane aggregates: a
// split, its end, then a shadow on the same target. Each canary has its own id, the runs of both arms
// record it, and each compare counts its own calls only: the shadow's starts at 0, not at the split's
// numbers. GET .../canaries lists both, and keeps the shadow as promoted after the promote.
func TestCanaryHistoryThroughAnEdge(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	e := c.edge("", nil)
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "history", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"}})
	if err != nil {
		t.Fatal(err)
	}
	canaryTarget := cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen3-8b"}
	split, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: canaryTarget, Percent: 50, Mode: cloudapi.CanarySplit})
	if err != nil {
		t.Fatal(err)
	}
	first := split.Canary.ID
	within(t, e, "history", "", 200, 5*time.Second, "the endpoint")
	// runsOf counts the shipped runs of a canary by arm.
	runsOf := func(rs []cloudapi.RunSummary, id string) map[string]int64 {
		n := map[string]int64{}
		for _, r := range rs {
			if r.CanaryID == id {
				n[r.Arm]++
			}
		}
		return n
	}
	// A call the edge answers while it still has the split (before it read the change) is the split's.
	for i := range 20 {
		if a := call(t, e, "history", "", fmt.Sprintf("split session %d", i)); a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
	}
	c.runsWhen(d.ID, func(rs []cloudapi.RunSummary) bool { n := runsOf(rs, first); return n["primary"]+n["canary"] >= 20 })

	if _, err := c.sdk.EndCanary(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	shadow, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: canaryTarget, Percent: 50, Mode: cloudapi.CanaryShadow})
	if err != nil {
		t.Fatal(err)
	}
	second := shadow.Canary.ID
	if second == "" || second == first || !shadow.Canary.StartedAt.After(split.Canary.StartedAt) {
		t.Fatalf("the shadow is canary %q started %v, the split %q started %v", second, shadow.Canary.StartedAt, first, split.Canary.StartedAt)
	}
	fresh, err := c.sdk.GetCanary(ctx, d.ID, second)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh.Compare) != 0 || fresh.Outcome != cloudapi.CanaryRunning {
		t.Fatalf("the new shadow's compare starts with %+v (outcome %s), want nothing", fresh.Compare, fresh.Outcome)
	}

	// Calls until the edge serves the shadow (its runs then carry the new id), then ten more.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		call(t, e, "history", "", fmt.Sprintf("waiting for the shadow %d", i))
		page, err := c.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		if len(runsOf(page.Runs, second)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the edge did not serve the shadow canary within 5 s")
		}
	}
	for i := range 10 {
		call(t, e, "history", "", fmt.Sprintf("shadow session %d", i))
	}
	shipped := c.runsWhen(d.ID, func(rs []cloudapi.RunSummary) bool {
		n := runsOf(rs, second)
		return n["primary"] >= 10 && n["canary"] == n["primary"]
	})
	for id, wantN := range map[string]map[string]int64{first: runsOf(shipped, first), second: runsOf(shipped, second)} {
		r, err := c.sdk.GetCanary(ctx, d.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, arm := range []string{cloudapi.ArmPrimary, cloudapi.ArmCanary} {
			var got int64
			if a := r.Arm(arm); a != nil {
				got = a.Requests
			}
			if got != wantN[arm] {
				t.Errorf("canary %s (%s): compare counts %d calls on the %s arm, its runs %d", id, r.Mode, got, arm, wantN[arm])
			}
		}
	}

	list, err := c.sdk.ListCanaries(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != second || list[0].Outcome != cloudapi.CanaryRunning || list[1].ID != first ||
		list[1].Outcome != cloudapi.CanaryEnded || list[1].EndedAt == nil || list[1].Mode != cloudapi.CanarySplit {
		t.Fatalf("canaries: %+v", list)
	}
	if _, err := c.sdk.PromoteCanary(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	list, err = c.sdk.ListCanaries(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Outcome != cloudapi.CanaryPromoted || list[0].EndedAt == nil || list[0].Arm(cloudapi.ArmCanary) == nil {
		t.Fatalf("after the promote: %+v", list[0])
	}
	var apiErr *cloudapi.Error
	if _, err := c.sdk.GetCanary(ctx, d.ID, "cny_nope"); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("an unknown canary: %v", err)
	}
}
