package core

import (
	"context"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"
)

func TestEdgeSeesChangesAtOnce(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "live", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.IssueKey(ctx, pr, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	ed, err := s.EdgeDeployment(ctx, "live")
	if err != nil || ed.Served() != "m" {
		t.Fatalf("edge snapshot: %+v %v", ed, err)
	}
	if key, err := s.EdgeAuthorize(ctx, ed, k.Plaintext); err != nil || key.ID != k.Key.ID {
		t.Fatalf("authorize: %q %v", key.ID, err)
	}
	for _, bad := range []string{"", "sk-ep-wrong", k.Plaintext + "x"} {
		if _, err := s.EdgeAuthorize(ctx, ed, bad); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
			t.Fatalf("key %q accepted: %v", bad, err)
		}
	}
	// Revocation is seen by the next request, cached key or not.
	if _, err := s.RevokeKey(ctx, pr, d.ID, k.Key.ID); err != nil {
		t.Fatal(err)
	}
	ed, _ = s.EdgeDeployment(ctx, "live")
	if _, err := s.EdgeAuthorize(ctx, ed, k.Plaintext); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
		t.Fatalf("revoked key accepted: %v", err)
	}
	// A key of another deployment does not open this one.
	other, _ := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "other", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	ok2, _ := s.IssueKey(ctx, pr, other.ID, "k")
	if _, err := s.EdgeAuthorize(ctx, ed, ok2.Plaintext); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
		t.Fatalf("another deployment's key accepted: %v", err)
	}
	off := false
	if _, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	_, err = s.EdgeDeployment(ctx, "live")
	if edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("disabled deployment still served: %v", err)
	}
	// The not_found of a disabled endpoint names it, so that the edge counts the call in its usage;
	// an unknown slug's names none, and a disabled endpoint's keys are still recognised for that count.
	if dd := edgemodel.DisabledDeployment(err); dd == nil || dd.ID != d.ID || dd.Slug != "live" {
		t.Fatalf("disabled deployment's not_found carries %+v", dd)
	} else if key, err := s.EdgeAuthorize(ctx, dd, ok2.Plaintext); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
		t.Fatalf("another deployment's key recognised on a disabled one: %q %v", key.ID, err)
	}
	if _, err := s.EdgeDeployment(ctx, "no-such-slug"); edgemodel.CodeOf(err) != edgemodel.CodeNotFound || edgemodel.DisabledDeployment(err) != nil {
		t.Fatalf("unknown slug: %v", err)
	}
	on := true
	if _, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if ed, err := s.EdgeDeployment(ctx, "live"); err != nil || ed.ID != d.ID {
		t.Fatalf("enabled again, not served at once: %v", err)
	}
}

// A lookup that read the database before a change must not put its stale result into the cache after
// the change flushed it: otherwise a key revoked during that lookup would stay accepted.
func TestEdgeCacheDropsStoresThatRacedAnInvalidation(t *testing.T) {
	c := newEdgeCache()
	hash := HashSecret("sk-ep-raced")
	gen := c.gen                                                       // the lookup starts and reads the key as enabled...
	c.invalidate()                                                     // ...a revoke commits and flushes the cache...
	c.storeKey(gen, hash, edgeKey{id: "key_1", deploymentID: "dep_1"}) // ...then the lookup stores
	c.storeDeployment(gen, "slug", &edgemodel.EdgeDeployment{ID: "dep_1"}, false)
	if _, ok := c.keys[hash]; ok {
		t.Fatal("a key read before the revoke was cached after it")
	}
	if _, ok := c.deployments["slug"]; ok {
		t.Fatal("a deployment read before a change was cached after it")
	}
	// Stores that did not race are kept.
	c.storeKey(c.gen, hash, edgeKey{id: "key_1", deploymentID: "dep_1"})
	if _, ok := c.keys[hash]; !ok {
		t.Fatal("a fresh lookup was not cached")
	}
}

// When the store does not answer (a database outage), an endpoint or key that is not cached yet is
// unavailable, a 503 the caller retries, never an internal error; what is cached keeps serving.
func TestEdgeLookupsWithTheStoreAwayAreUnavailable(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	for _, slug := range []string{"warm", "cold"} {
		if _, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: slug, Target: edgemodel.Target{Kind: "base_model", Model: "m"}}); err != nil {
			t.Fatal(err)
		}
	}
	warm, err := s.EdgeDeployment(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	s.db.Close() // the database goes away
	if d, err := s.EdgeDeployment(ctx, "warm"); err != nil || d.ID != warm.ID {
		t.Fatalf("a cached endpoint with the store away: %v %v", d, err)
	}
	_, err = s.EdgeDeployment(ctx, "cold")
	if edgemodel.CodeOf(err) != edgemodel.CodeUnavailable {
		t.Fatalf("an endpoint not cached, with the store away: %v, want unavailable", err)
	}
	if strings.Contains(err.Error(), "sql") {
		t.Errorf("the answer names the store's error: %v", err)
	}
	warm.AuthMode = edgemodel.AuthFixedAPIKey
	if _, err := s.EdgeAuthorize(ctx, warm, "sk-ep-not-cached"); edgemodel.CodeOf(err) != edgemodel.CodeUnavailable {
		t.Fatalf("a key not cached, with the store away: %v, want unavailable", err)
	}
}
