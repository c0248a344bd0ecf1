package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

func intp(n int) *int { return &n }

func show(p *int) string {
	if p == nil {
		return "null"
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

func TestApplyLimits(t *testing.T) {
	cur := Limits{RequestsPerMinute: intp(60), TokensPerMinute: intp(1000)}
	cases := []struct {
		name     string
		body     string // the "limits" value of a PATCH body
		rpm, tpm string // the limits after, or "" when the update is refused
		field    string // the field the error must name
	}{
		{"absent fields are unchanged", `{}`, "60", "1000", ""},
		{"one field set, the other unchanged", `{"requestsPerMinute": 120}`, "120", "1000", ""},
		{"explicit null clears one field", `{"tokensPerMinute": null}`, "60", "null", ""},
		{"null clears both", `null`, "null", "null", ""},
		{"both set", `{"requestsPerMinute": 1, "tokensPerMinute": 1000000000}`, "1", "1000000000", ""},
		{"zero is refused", `{"requestsPerMinute": 0}`, "", "", "requestsPerMinute"},
		{"negative is refused", `{"tokensPerMinute": -5}`, "", "", "tokensPerMinute"},
		{"too large is refused", `{"tokensPerMinute": 1000000001}`, "", "", "tokensPerMinute"},
		{"a bad field refuses the good one too", `{"requestsPerMinute": 5, "tokensPerMinute": 0}`, "", "", "tokensPerMinute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var u cloudapi.LimitsUpdate
			if err := json.Unmarshal([]byte(tc.body), &u); err != nil {
				t.Fatal(err)
			}
			got, err := ApplyLimits(cur, u)
			if tc.field != "" {
				if CodeOf(err) != CodeInvalidRequest || !strings.Contains(err.Error(), "limits."+tc.field) {
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
	// The current value is never aliased: changing the result leaves the input alone.
	got, _ := ApplyLimits(cur, cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(7)})
	*got.RequestsPerMinute = 8
	if *cur.RequestsPerMinute != 60 {
		t.Fatal("ApplyLimits aliased its input")
	}
}

// The PATCH body is read strictly: a wrong type or an unknown field inside limits is an error naming it.
func TestLimitsUpdateDecoding(t *testing.T) {
	for body, want := range map[string]string{
		`{"requestsPerMinute": "60"}`:  "limits.requestsPerMinute must be a whole number",
		`{"requestsPerMinute": 1.5}`:   "limits.requestsPerMinute must be a whole number",
		`{"requestPerMinute": 60}`:     `unknown field "requestPerMinute"`,
		`60`:                           "limits must be an object",
		`{"tokensPerMinute": [1]}`:     "limits.tokensPerMinute must be a whole number",
		`{"tokensPerMinute": {"a":1}}`: "limits.tokensPerMinute must be a whole number",
	} {
		var u cloudapi.LimitsUpdate
		err := json.Unmarshal([]byte(body), &u)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", body, err, want)
		}
	}
	// And written back the same way: unchanged fields absent, cleared ones null.
	b, _ := json.Marshal(cloudapi.UpdateDeploymentRequest{Limits: cloudapi.LimitsUpdate{TokensPerMinute: cloudapi.NoLimit()}})
	if string(b) != `{"limits":{"tokensPerMinute":null}}` {
		t.Errorf("encoded %s", b)
	}
	b, _ = json.Marshal(cloudapi.UpdateDeploymentRequest{})
	if string(b) != `{}` {
		t.Errorf("an empty update encoded as %s", b)
	}
}

// Limits reach the edge with the deployment and with the key, and a change is seen at once.
func TestEdgeCarriesLimits(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	_, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, pr, cloudapi.CreateDeploymentRequest{Slug: "limited", Target: Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.IssueKey(ctx, pr, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	ed, _ := s.EdgeDeployment(ctx, "limited")
	key, err := s.EdgeAuthorize(ctx, ed, k.Plaintext)
	if err != nil || !ed.Limits.Unlimited() || !key.Limits.Unlimited() {
		t.Fatalf("new deployment and key should be unlimited: %+v %+v %v", ed.Limits, key.Limits, err)
	}

	if _, err := s.UpdateDeployment(ctx, pr, d.ID, cloudapi.UpdateDeploymentRequest{Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(30)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateKey(ctx, pr, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Limits: cloudapi.LimitsUpdate{TokensPerMinute: cloudapi.LimitTo(500)}}); err != nil {
		t.Fatal(err)
	}
	ed, _ = s.EdgeDeployment(ctx, "limited")
	key, err = s.EdgeAuthorize(ctx, ed, k.Plaintext)
	if err != nil || show(ed.Limits.RequestsPerMinute) != "30" || ed.Limits.TokensPerMinute != nil ||
		key.ID != k.Key.ID || show(key.Limits.TokensPerMinute) != "500" || key.Limits.RequestsPerMinute != nil {
		t.Fatalf("edge limits: deployment %+v key %+v %v", ed.Limits, key.Limits, err)
	}

	// A refused update changes nothing, in the database or at the edge.
	_, err = s.UpdateDeployment(ctx, pr, d.ID, cloudapi.UpdateDeploymentRequest{Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(0)}})
	if CodeOf(err) != CodeInvalidRequest {
		t.Fatalf("0 rpm: %v", err)
	}
	ed, _ = s.EdgeDeployment(ctx, "limited")
	if show(ed.Limits.RequestsPerMinute) != "30" {
		t.Fatalf("a refused update changed the limit to %s", show(ed.Limits.RequestsPerMinute))
	}
}
