package core

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"
)

func intp(n int) *int { return &n }

func show(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

func set(n int) LimitChange { return LimitChange{Set: true, Value: &n} }

var noLimit = LimitChange{Set: true}

func TestApplyRateLimits(t *testing.T) {
	cur := edgemodel.RateLimits{RequestsPerMinute: intp(60), TokensPerMinute: intp(1000)}
	cases := []struct {
		name     string
		change   RateLimitsChange
		rpm, tpm string // the limits after, or "" when the change is refused
		field    string // the field the error must name
	}{
		{"nothing given changes nothing", RateLimitsChange{}, "60", "1000", ""},
		{"one field set, the other unchanged", RateLimitsChange{RequestsPerMinute: set(120)}, "120", "1000", ""},
		{"a cleared field is unlimited", RateLimitsChange{TokensPerMinute: noLimit}, "60", "null", ""},
		{"both cleared", RateLimitsChange{RequestsPerMinute: noLimit, TokensPerMinute: noLimit}, "null", "null", ""},
		{"the bounds", RateLimitsChange{RequestsPerMinute: set(1), TokensPerMinute: set(MaxRateLimit)}, "1", "1000000000", ""},
		{"zero is refused", RateLimitsChange{RequestsPerMinute: set(0)}, "", "", "requestsPerMinute"},
		{"negative is refused", RateLimitsChange{TokensPerMinute: set(-5)}, "", "", "tokensPerMinute"},
		{"too large is refused", RateLimitsChange{TokensPerMinute: set(MaxRateLimit + 1)}, "", "", "tokensPerMinute"},
		{"a bad field refuses the good one too", RateLimitsChange{RequestsPerMinute: set(5), TokensPerMinute: set(0)}, "", "", "tokensPerMinute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyRateLimits(cur, tc.change)
			if tc.field != "" {
				if edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest || !strings.Contains(err.Error(), "limits."+tc.field) {
					t.Fatalf("want invalid_request naming limits.%s, got %v", tc.field, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if show(got.RequestsPerMinute) != tc.rpm || show(got.TokensPerMinute) != tc.tpm {
				t.Fatalf("got rpm %s tpm %s, want %s %s", show(got.RequestsPerMinute), show(got.TokensPerMinute), tc.rpm, tc.tpm)
			}
		})
	}
	// The result never aliases the change: changing the caller's number later changes no limit.
	n := 7
	got, _ := ApplyRateLimits(cur, RateLimitsChange{RequestsPerMinute: LimitChange{Set: true, Value: &n}})
	n = 8
	if *got.RequestsPerMinute != 7 {
		t.Fatal("ApplyRateLimits kept a pointer to its input")
	}
}

// Limits reach the edge with the deployment and with the key, and a change is seen at once.
func TestEdgeCarriesRateLimits(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "limited", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.IssueKey(ctx, pr, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	ed, _ := s.EdgeDeployment(ctx, "limited")
	key, err := s.EdgeAuthorize(ctx, ed, k.Plaintext)
	if err != nil || !ed.Limits.Unlimited() || !key.Limits.Unlimited() || !d.Limits.Unlimited() || !k.Key.Limits.Unlimited() {
		t.Fatalf("new deployments and keys are unlimited: %+v %+v %v", ed.Limits, key.Limits, err)
	}

	got, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Limits: RateLimitsChange{RequestsPerMinute: set(30)}})
	if err != nil || show(got.Limits.RequestsPerMinute) != "30" {
		t.Fatalf("update: %+v %v", got, err)
	}
	gotKey, err := s.UpdateKey(ctx, pr, d.ID, k.Key.ID, KeyChange{Limits: RateLimitsChange{TokensPerMinute: set(500)}})
	if err != nil || show(gotKey.Limits.TokensPerMinute) != "500" {
		t.Fatalf("key update: %+v %v", gotKey, err)
	}
	ed, _ = s.EdgeDeployment(ctx, "limited")
	key, err = s.EdgeAuthorize(ctx, ed, k.Plaintext)
	if err != nil || show(ed.Limits.RequestsPerMinute) != "30" || ed.Limits.TokensPerMinute != nil ||
		key.ID != k.Key.ID || show(key.Limits.TokensPerMinute) != "500" || key.Limits.RequestsPerMinute != nil {
		t.Fatalf("edge limits: deployment %+v key %+v %v", ed.Limits, key.Limits, err)
	}

	// A refused change changes nothing, in the database or at the edge.
	_, err = s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Limits: RateLimitsChange{RequestsPerMinute: set(0)}})
	if edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Fatalf("0 rpm: %v", err)
	}
	ed, _ = s.EdgeDeployment(ctx, "limited")
	if show(ed.Limits.RequestsPerMinute) != "30" {
		t.Fatalf("a refused change set the limit to %s", show(ed.Limits.RequestsPerMinute))
	}
	// Keys are found under their own deployment only.
	other, _ := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "other", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if _, err := s.UpdateKey(ctx, pr, other.ID, k.Key.ID, KeyChange{Limits: RateLimitsChange{TokensPerMinute: noLimit}}); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("a key under another deployment: %v", err)
	}
}
