package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

// anonymousEnv is newEnv with the service's real anonymous cap.
func anonymousEnv(t *testing.T) *env {
	e := newEnv(t)
	e.svc.AnonymousEndpointLimit = core.AnonymousEndpointLimit
	return e
}

func TestAnonymousCapCountsEveryKindOfEndpoint(t *testing.T) {
	e := anonymousEnv(t)
	ctx := context.Background()
	c := e.user()
	var ids []string
	// Studio and SDK creations and one-click endpoints count together.
	for _, slug := range []string{"cap-a", "cap-b", "cap-c"} {
		d := must(c.CreateDeployment(ctx, base(slug)))
		ids = append(ids, d.ID)
	}
	for i := 0; i < 2; i++ {
		d := must(c.OneClick(ctx))
		ids = append(ids, d.ID)
	}
	_, err := c.CreateDeployment(ctx, base("cap-f"))
	wantErr(t, err, 403, "anonymous_limit")
	_, err = c.OneClick(ctx)
	wantErr(t, err, 403, "anonymous_limit")
	// Disabling does not free a place: the endpoint still holds its slug.
	off := false
	must(c.UpdateDeployment(ctx, ids[0], cloudapi.UpdateDeploymentRequest{Enabled: &off}))
	_, err = c.CreateDeployment(ctx, base("cap-f"))
	wantErr(t, err, 403, "anonymous_limit")
	// Deleting one does.
	if err := c.DeleteDeployment(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	d := must(c.CreateDeployment(ctx, base("cap-f")))
	if d.ExpiresAt == nil || d.ExpiresAt.Sub(d.CreatedAt) != 7*24*time.Hour {
		t.Fatalf("anonymous endpoint expiresAt = %v, want createdAt + 7 days", d.ExpiresAt)
	}
	// Another anonymous identity has its own five.
	must(e.user().CreateDeployment(ctx, base("cap-other")))
}

func TestClaimKeepsEndpointsAndRetiresTheAnonymousToken(t *testing.T) {
	e := anonymousEnv(t)
	ctx := context.Background()
	anon := e.user()
	made := must(anon.CreateDeployment(ctx, base("made-anonymously")))
	quick := must(anon.OneClick(ctx))
	job := e.completedJob(anon)

	ann := e.member("ann@example.com")
	// Only a signed-in caller may claim, and only a live anonymous token.
	_, err := e.user().ClaimAnonymous(ctx, anon.Token)
	wantErr(t, err, 403, "forbidden")
	_, err = ann.ClaimAnonymous(ctx, "svc_at_forged")
	wantErr(t, err, 400, "invalid_request")

	claim := must(ann.ClaimAnonymous(ctx, anon.Token))
	if claim.OrgSlug != anon.OrgSlug || claim.ProjectSlug != anon.ProjectSlug || claim.Endpoints != 2 {
		t.Fatalf("claim: %+v, want org %s project %s and 2 endpoints", claim, anon.OrgSlug, anon.ProjectSlug)
	}
	// The anonymous token stops working, and cannot be claimed twice.
	_, err = anon.Me(ctx)
	wantErr(t, err, 401, "unauthorized")
	_, err = ann.ClaimAnonymous(ctx, anon.Token)
	wantErr(t, err, 400, "invalid_request")

	// The user now reaches the project (the studio's state.json keeps working) and its endpoints and
	// jobs, which no longer expire.
	kept := ann.WithProject(claim.OrgSlug, claim.ProjectSlug)
	list := must(kept.ListDeployments(ctx))
	if len(list) != 2 {
		t.Fatalf("claimed project lists %d endpoints, want 2", len(list))
	}
	for _, d := range list {
		if d.ExpiresAt != nil {
			t.Errorf("claimed endpoint %s still expires at %v", d.Slug, d.ExpiresAt)
		}
		if d.ID != made.ID && d.ID != quick.ID {
			t.Errorf("unexpected endpoint %s", d.Slug)
		}
	}
	must(kept.GetJob(ctx, job.ID))
	// The anonymous cap no longer applies there.
	for _, slug := range []string{"after-a", "after-b", "after-c", "after-d"} {
		if d := must(kept.CreateDeployment(ctx, base(slug))); d.ExpiresAt != nil {
			t.Fatalf("endpoint created after the claim expires: %v", d.ExpiresAt)
		}
	}
}

func TestAnonymousMintsAreLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	anon := cloudapi.New(e.url, "")
	for i := 0; i < core.DefaultLimits.MintBurst; i++ {
		must(anon.MintAnonymous(ctx))
	}
	_, err := anon.MintAnonymous(ctx)
	wantErr(t, err, 429, "too_many_requests")
	var ce *cloudapi.Error
	if !errors.As(err, &ce) || ce.RetryAfter <= 0 || ce.RetryAfter > core.DefaultLimits.MintEvery {
		t.Fatalf("Retry-After = %v, want between 0 and %v", ce.RetryAfter, core.DefaultLimits.MintEvery)
	}
}
