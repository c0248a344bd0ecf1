package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
)

func TestValidateCanary(t *testing.T) {
	ok := Canary{Target: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "m"}, Percent: 10, Mode: edgemodel.CanarySplit}
	for _, tc := range []struct {
		name, kind string
		c          Canary
		code, says string
	}{
		{"valid split", edgemodel.TargetBaseModel, ok, "", ""},
		{"valid shadow", edgemodel.TargetFinalAdapter, Canary{Target: ok.Target, Percent: 99, Mode: edgemodel.CanaryShadow}, "", ""},
		{"multi-model deployment", edgemodel.TargetMultiModel, ok, edgemodel.CodeInvalidRequest, "canary: a multi_model deployment takes no canary"},
		{"percent 0", edgemodel.TargetBaseModel, Canary{Target: ok.Target, Percent: 0, Mode: edgemodel.CanarySplit}, edgemodel.CodeInvalidRequest, "canary.percent"},
		{"percent 100", edgemodel.TargetBaseModel, Canary{Target: ok.Target, Percent: 100, Mode: edgemodel.CanarySplit}, edgemodel.CodeInvalidRequest, "canary.percent"},
		{"mode", edgemodel.TargetBaseModel, Canary{Target: ok.Target, Percent: 5, Mode: "half"}, edgemodel.CodeInvalidRequest, "canary.mode"},
		{"multi-model canary", edgemodel.TargetBaseModel, Canary{Target: edgemodel.Target{Kind: edgemodel.TargetMultiModel}, Percent: 5, Mode: edgemodel.CanarySplit}, edgemodel.CodeInvalidTarget, "canary.target"},
	} {
		err := ValidateCanary(tc.kind, tc.c)
		if edgemodel.CodeOf(err) != tc.code || (tc.says != "" && !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("%s: %v, want code %q saying %q", tc.name, err, tc.code, tc.says)
		}
	}
}

// A canary's target is validated as a target is, with errors naming canary.target; the deployment JSON
// carries it, the edge serves it as a second view of the deployment, and "canary": null ends it.
func TestCanaryIsValidatedLikeATargetAndReachesTheEdge(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	_, other := userProject(t, s, "other@example.com")
	status, adapter := JobCompleted, "s3://bucket/a"
	job, err := s.CreateJob(ctx, pr, NewJob{BaseModel: "m", Status: &status, FinalAdapter: &adapter, Checkpoints: []Checkpoint{{Step: 400, Artifact: "s3://bucket/a-400"}}})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := s.CreateJob(ctx, other, NewJob{BaseModel: "m", Status: &status, FinalAdapter: &adapter})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "tuned", Target: edgemodel.Target{Kind: edgemodel.TargetFinalAdapter, JobID: job.ID}})
	if err != nil {
		t.Fatal(err)
	}
	set := func(c Canary) (*Deployment, error) {
		return s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Canary: &CanaryChange{Canary: &c}})
	}
	for _, tc := range []struct {
		target edgemodel.Target
		says   string
	}{
		{edgemodel.Target{Kind: edgemodel.TargetFinalAdapter, JobID: foreign.ID}, "is not a job of this project"},
		{edgemodel.Target{Kind: edgemodel.TargetCheckpoint, JobID: job.ID, Step: 5}, "has no checkpoint at step 5"},
		{edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "unregistered"}, "is not registered for inference"},
	} {
		_, err := set(Canary{Target: tc.target, Percent: 10, Mode: edgemodel.CanarySplit})
		if edgemodel.CodeOf(err) != edgemodel.CodeInvalidTarget || !strings.HasPrefix(err.(*edgemodel.Error).Message, "canary.target: ") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("canary %+v: %v, want invalid_target on canary.target saying %q", tc.target, err, tc.says)
		}
	}
	if got, _ := s.GetDeployment(ctx, pr, d.ID); got.Canary != nil {
		t.Fatalf("a refused canary was kept: %+v", got.Canary)
	}

	got, err := set(Canary{Target: edgemodel.Target{Kind: edgemodel.TargetCheckpoint, JobID: job.ID, Step: 400}, Percent: 30, Mode: edgemodel.CanarySplit})
	if err != nil {
		t.Fatal(err)
	}
	if got.Canary == nil || got.Canary.Percent != 30 || got.Canary.Target.Step != 400 || got.Target.Kind != edgemodel.TargetFinalAdapter {
		t.Fatalf("deployment after setting a canary: %+v %+v", got, got.Canary)
	}
	ed, err := s.EdgeDeployment(ctx, "tuned")
	if err != nil || ed.Canary == nil {
		t.Fatalf("edge deployment: %+v %v", ed, err)
	}
	arm := ed.Canary.Deployment
	if ed.Served() != "ft-"+job.ID || arm.Served() != "ft-"+job.ID+"-step-400" || arm.Adapter != "s3://bucket/a-400" || arm.ID != ed.ID || arm.Canary != nil {
		t.Fatalf("the canary's view serves %q (%+v), the primary %q", arm.Served(), arm, ed.Served())
	}
	// Other fields of a change leave the canary; retargeting to multi_model while it stays is refused.
	off := false
	if got, err = s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Enabled: &off}); err != nil || got.Canary == nil {
		t.Fatalf("disabling dropped the canary: %+v %v", got, err)
	}
	multi := edgemodel.Target{Kind: edgemodel.TargetMultiModel}
	if _, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Target: &multi}); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest || !strings.Contains(err.Error(), "canary") {
		t.Fatalf("retarget to multi_model under a canary: %v", err)
	}
	if got, err = s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Canary: &CanaryChange{}}); err != nil || got.Canary != nil {
		t.Fatalf("canary null: %+v %v", got, err)
	}
	on := true
	s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Enabled: &on})
	if ed, _ := s.EdgeDeployment(ctx, "tuned"); ed == nil || ed.Canary != nil {
		t.Fatalf("an ended canary is still served: %+v", ed)
	}

	// A multi-model deployment takes none.
	m, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "every", Target: multi})
	if err != nil {
		t.Fatal(err)
	}
	c := Canary{Target: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "m"}, Percent: 10, Mode: edgemodel.CanarySplit}
	if _, err := s.UpdateDeployment(ctx, pr, m.ID, DeploymentChange{Canary: &CanaryChange{Canary: &c}}); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest || !strings.Contains(err.Error(), "canary") {
		t.Fatalf("canary on a multi-model deployment: %v", err)
	}
}

// Promote makes the canary the target and clears it in one change: one event of the change feed, and
// no edge lookup between the two states sees anything but the one or the other.
func TestPromoteSwapsTargetAndCanaryInOneChange(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	status, adapter := JobCompleted, "s3://bucket/a"
	job, err := s.CreateJob(ctx, pr, NewJob{BaseModel: "m", Status: &status, FinalAdapter: &adapter, Checkpoints: []Checkpoint{{Step: 400, Artifact: "s3://bucket/a-400"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "promote", Target: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PromoteCanary(ctx, pr, d.ID, "", nil); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest || !strings.Contains(err.Error(), "no canary") {
		t.Fatalf("promote without a canary: %v", err)
	}
	c := Canary{Target: edgemodel.Target{Kind: edgemodel.TargetCheckpoint, JobID: job.ID, Step: 400}, Percent: 50, Mode: edgemodel.CanaryShadow}
	if _, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Canary: &CanaryChange{Canary: &c}}); err != nil {
		t.Fatal(err)
	}
	head, err := s.EdgeFeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.PromoteCanary(ctx, pr, d.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Canary != nil || got.Target != c.Target {
		t.Fatalf("after promote: target %+v canary %+v", got.Target, got.Canary)
	}
	if names, _ := feedSince(t, s, head); len(names) != 1 || names[0] != "promote" {
		t.Fatalf("promote wrote %q to the change feed, want one event", names)
	}
	ed, err := s.EdgeDeployment(ctx, "promote")
	if err != nil || ed.Canary != nil || ed.Served() != "ft-"+job.ID+"-step-400" {
		t.Fatalf("edge after promote: %+v %v", ed, err)
	}
	if _, err := s.PromoteCanary(ctx, pr, "dep_nope", "", nil); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("promote of an unknown deployment: %v", err)
	}
}

// Usage by arm sums the arms' hourly rows into buckets and totals, primary first, each arm's target
// apart (a promoted canary's target starts a new entry), percentiles of latency and TTFT from their
// histograms.
func TestUsageByArm(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "arms", Target: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	hour := now.Truncate(time.Hour).Add(-2 * time.Hour).UnixMilli() // and the hour after it, both in the default range
	add := func(arm, target string, at int64, requests, errors, lat100, ttft25 int64) {
		t.Helper()
		err := s.q.UsageArmAdd(ctx, s.db, dbsqlc.UsageArmAddParams{DeploymentID: d.ID, Arm: arm, ArmTarget: target, Hour: at,
			Requests: requests, Errors: errors, PromptTokens: 10 * requests, CompletionTokens: 5 * requests, Lat100: lat100, LatInf: requests - lat100,
			Ttft25: ttft25, Ttft5000: requests - ttft25})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(edgemodel.ArmCanary, "ft-b", hour, 4, 1, 4, 4)
	add(edgemodel.ArmPrimary, "m", hour, 10, 0, 10, 10)
	add(edgemodel.ArmPrimary, "m", hour+time.Hour.Milliseconds(), 10, 2, 0, 0)
	arms, err := s.UsageByArm(ctx, pr, d.ID, UsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(arms) != 2 || arms[0].Arm != edgemodel.ArmPrimary || arms[1].Arm != edgemodel.ArmCanary || arms[1].Target != "ft-b" {
		t.Fatalf("arms: %+v", arms)
	}
	pt, ct := arms[0].Totals, arms[1].Totals
	if pt.Requests != 20 || pt.Errors != 2 || pt.PromptTokens != 200 || ct.Requests != 4 || ct.Errors != 1 || ct.CompletionTokens != 20 {
		t.Fatalf("totals: primary %+v canary %+v", pt, ct)
	}
	if *ct.Latency.P50Ms > 100 || *ct.TTFT.P95Ms > 25 || *pt.Latency.P95Ms != 60000 || *pt.TTFT.P95Ms <= 2500 {
		t.Fatalf("percentiles: primary %d/%d canary %d/%d", *pt.Latency.P95Ms, *pt.TTFT.P95Ms, *ct.Latency.P50Ms, *ct.TTFT.P95Ms)
	}
	if n := len(arms[0].Buckets); n != 24 {
		t.Fatalf("%d buckets, want the 24 of the default range", n)
	}
	var withCalls int
	for _, b := range arms[1].Buckets {
		if b.Requests > 0 {
			withCalls++
		} else if b.Latency.P50Ms != nil {
			t.Fatalf("an empty bucket has a percentile: %+v", b)
		}
	}
	if withCalls != 1 {
		t.Fatalf("the canary's calls fill %d buckets, want 1", withCalls)
	}
	if _, err := s.UsageByArm(ctx, pr, d.ID, UsageRequest{KeyID: "key_x"}); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Fatalf("groupBy=arm with a key: %v", err)
	}
}

// A canary keeps its id while only its percent changes, and a new target or mode replaces it: the old
// one ends as replaced, by who made the change, and the new one starts with an empty compare. The
// history lists them newest first; the edge serves the running canary's id.
func TestCanaryIdentityAndHistory(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	status, adapter := JobCompleted, "s3://bucket/a"
	job, err := s.CreateJob(ctx, pr, NewJob{BaseModel: "m", Status: &status, FinalAdapter: &adapter, Checkpoints: []Checkpoint{{Step: 400, Artifact: "s3://bucket/a-400"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "identity", Target: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	set := func(c Canary, by string) *Deployment {
		t.Helper()
		// A change a millisecond after the last: two canaries started in one millisecond list in the
		// order of their random ids (1 run in about 20 failed so).
		*now = now.Add(time.Millisecond)
		got, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Canary: &CanaryChange{Canary: &c, By: by}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	checkpoint := edgemodel.Target{Kind: edgemodel.TargetCheckpoint, JobID: job.ID, Step: 400}
	first := set(Canary{Target: checkpoint, Percent: 10, Mode: edgemodel.CanarySplit}, "idn_a").Canary
	if first == nil || !strings.HasPrefix(first.ID, "cny_") || first.StartedAt.IsZero() {
		t.Fatalf("a canary set: %+v", first)
	}
	if again := set(Canary{Target: checkpoint, Percent: 30, Mode: edgemodel.CanarySplit}, "idn_b").Canary; again.ID != first.ID || !again.StartedAt.Equal(first.StartedAt) || again.Percent != 30 {
		t.Fatalf("a new percent made another canary: %+v, was %+v", again, first)
	}
	second := set(Canary{Target: checkpoint, Percent: 30, Mode: edgemodel.CanaryShadow}, "idn_c").Canary
	if second.ID == first.ID {
		t.Fatal("a new mode kept the canary's id")
	}
	if ed, err := s.EdgeDeployment(ctx, "identity"); err != nil || ed.Canary == nil || ed.Canary.ID != second.ID {
		t.Fatalf("the edge serves canary %+v, want %s", ed, second.ID)
	}
	list, err := s.ListCanaries(ctx, pr, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != second.ID || list[0].Outcome != CanaryRunning || list[0].StartedBy != "idn_c" ||
		list[1].ID != first.ID || list[1].Outcome != CanaryReplaced || list[1].EndedBy != "idn_c" || list[1].EndedAt == nil ||
		list[1].Percent != 30 || list[1].StartedBy != "idn_a" || len(list[0].Compare) != 0 {
		t.Fatalf("history: %+v", list)
	}
	if _, err := s.GetCanary(ctx, pr, d.ID, "cny_nope"); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("an unknown canary: %v", err)
	}
}
