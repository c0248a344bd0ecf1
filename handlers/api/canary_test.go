package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// The canary through the API and the SDK: set, read back in the deployment JSON (null when none),
// refused in the API's envelope naming the field, ended with null, promoted in one call.
func TestCanaryThroughTheAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	job := e.completedJob(c)
	d := must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "canaried", Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: job.ID}}))
	if status, out := e.raw(c, http.MethodGet, "/deployments/"+d.ID, ""); status != 200 || !strings.Contains(out, `"canary":null`) {
		t.Fatalf("a deployment without a canary: HTTP %d %s", status, out)
	}
	step := cloudapi.Target{Kind: cloudapi.TargetCheckpoint, JobID: job.ID, Step: 100}
	got := must(c.SetCanary(ctx, d.ID, cloudapi.Canary{Target: step, Percent: 10, Mode: cloudapi.CanarySplit}))
	if got.Canary == nil || got.Canary.Target != step || got.Canary.Percent != 10 || got.Canary.Mode != cloudapi.CanarySplit {
		t.Fatalf("set: %+v", got.Canary)
	}
	if again := must(c.GetDeployment(ctx, d.ID)); again.Canary == nil || *again.Canary != *got.Canary {
		t.Fatalf("read back: %+v", again.Canary)
	}

	for body, want := range map[string]string{
		`{"canary": {"target": {"kind": "checkpoint", "jobId": "` + job.ID + `", "step": 7}, "percent": 10}}`: `canary.target: job ` + job.ID + ` has no checkpoint at step 7`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "percent": 100}}`:                   `canary.percent must be a whole number from 1 to 99`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "percent": 5, "mode": "both"}}`:     `canary.mode must be`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "share": 5}}`:                       `field \"canary.share\" is not a field of this request`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "percent": "10"}}`:                  `field \"canary.percent\" must be a whole number, not string`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "percent": 10.5}}`:                  `field \"canary.percent\" must be a whole number`,
		`{"canary": {"target": {"kind": "checkpoint", "jobId": "x", "step": "4"}, "percent": 10}}`:            `field \"canary.target.step\" must be a whole number, not string`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}}}`:                                   `field \"canary.percent\" is required in split mode`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "percent": 0, "mode": "split"}}`:    `canary.percent must be a whole number from 1 to 99 (got 0); a shadow canary copies every call`,
		`{"canary": {"target": {"kind": "base_model", "model": "base-b"}, "percent": 0.5, "mode": "shadow"}}`: `field \"canary.percent\" must be a whole number`,
		`{"canary": {"percent": 5}}`: `field \"canary.target\" is required`,
		`{"canary": 5}`:              `field \"canary\" must be an object`,
	} {
		status, out := e.raw(c, http.MethodPatch, "/deployments/"+d.ID, body)
		if status != 400 || !strings.Contains(out, want) || !strings.Contains(out, `"error":{"status":400`) {
			t.Errorf("%s: HTTP %d %s", body, status, out)
		}
	}
	if still := must(c.GetDeployment(ctx, d.ID)); still.Canary == nil || still.Canary.Percent != 10 {
		t.Fatalf("a refused change touched the canary: %+v", still.Canary)
	}

	// A multi-model deployment takes none: 400 naming the field.
	multi := must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "every-model", Target: cloudapi.Target{Kind: cloudapi.TargetMultiModel}}))
	_, err := c.SetCanary(ctx, multi.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "base-b"}, Percent: 5, Mode: cloudapi.CanarySplit})
	wantErr(t, err, 400, "invalid_request")
	if !strings.Contains(err.Error(), "canary") {
		t.Fatalf("the multi-model refusal does not name the field: %v", err)
	}

	// Usage by arm answers an entry per arm once there are calls, none before; keyId is refused with it.
	u := must(c.GetDeploymentUsageByArm(ctx, d.ID, cloudapi.UsageOptions{}))
	if u.Arms == nil || len(u.Arms) != 0 {
		t.Fatalf("usage by arm without calls: %+v", u)
	}
	_, err = c.GetDeploymentUsageByArm(ctx, d.ID, cloudapi.UsageOptions{KeyID: "key_x"})
	wantErr(t, err, 400, "invalid_request")
	if status, out := e.raw(c, http.MethodGet, "/deployments/"+d.ID+"/usage?groupBy=model", ""); status != 400 || !strings.Contains(out, "groupBy") {
		t.Fatalf("groupBy=model: HTTP %d %s", status, out)
	}

	// Promote: the canary's target becomes the deployment's, the canary ends; another project gets 404.
	_, err = e.user().PromoteCanary(ctx, d.ID)
	wantErr(t, err, 404, "not_found")
	promoted := must(c.PromoteCanary(ctx, d.ID))
	if promoted.Canary != nil || promoted.Target != step {
		t.Fatalf("promoted: target %+v canary %+v", promoted.Target, promoted.Canary)
	}
	_, err = c.PromoteCanary(ctx, d.ID)
	wantErr(t, err, 400, "invalid_request")

	// End: "canary": null.
	must(c.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "base-b"}, Percent: 50, Mode: cloudapi.CanaryShadow}))
	if ended := must(c.EndCanary(ctx, d.ID)); ended.Canary != nil || ended.Target != step {
		t.Fatalf("ended: %+v", ended)
	}
}
