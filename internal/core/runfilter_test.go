package core

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// The run listing filters by status, key, arm and time, alone and together, and pages through what
// passes with the same filter; a value it does not know is refused, naming those it takes.
func TestListRunsFilters(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "logged", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(-3 * time.Hour)
	add := func(id, status, key, arm, shadowOf string, minutes int) {
		t.Helper()
		k := sql.NullString{String: key, Valid: key != ""}
		code := int64(200)
		if status == "error" {
			code = 400
		}
		if id == "run_e" {
			code = 429 // turned away by svc: a rate limit, a budget, a busy model
		}
		if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: id, DeploymentID: d.ID, KeyID: k, Model: "m", Status: status, StatusCode: code, LatencyMs: 1,
			CreatedAt: ms(at.Add(time.Duration(minutes) * time.Minute)), Request: "{}", Response: "{}", Arm: arm, ShadowOf: shadowOf}); err != nil {
			t.Fatal(err)
		}
	}
	add("run_a", "ok", "key_1", "", "", 0)
	add("run_b", "error", "key_1", "", "", 10)
	add("run_c", "ok", "key_2", "primary", "", 60)
	add("run_d", "ok", "", "canary", "run_c", 61)
	add("run_e", "error", "key_2", "canary", "", 120)
	add("run_f", "ok", "key_1", "primary", "", 170)

	ids := func(f RunFilter, limit int) string {
		t.Helper()
		var out []string
		cursor := ""
		for {
			page, err := s.ListRuns(ctx, pr, d.ID, f, limit, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Items {
				out = append(out, strings.TrimPrefix(r.ID, "run_"))
			}
			if cursor = page.NextCursor; cursor == "" {
				return strings.Join(out, " ")
			}
		}
	}
	for _, tc := range []struct {
		name string
		f    RunFilter
		want string
	}{
		{"none", RunFilter{}, "f e d c b a"},
		{"errors", RunFilter{Status: "error"}, "e b"},
		{"ok", RunFilter{Status: "ok"}, "f d c a"},
		{"refused", RunFilter{Status: "refused"}, "e"},
		{"a key", RunFilter{KeyID: "key_1"}, "f b a"},
		{"primary", RunFilter{Arm: "primary"}, "f c b a"},
		{"canary", RunFilter{Arm: "canary"}, "e d"},
		{"shadow", RunFilter{Arm: "shadow"}, "d"},
		{"since", RunFilter{Since: at.Add(time.Hour)}, "f e d c"},
		{"until", RunFilter{Until: at.Add(time.Hour)}, "b a"},
		{"a window", RunFilter{Since: at.Add(time.Hour), Until: at.Add(2 * time.Hour)}, "d c"},
		{"together", RunFilter{Status: "ok", KeyID: "key_1", Arm: "primary", Since: at.Add(time.Minute)}, "f"},
	} {
		for _, limit := range []int{1, 2, 50} {
			if got := ids(tc.f, limit); got != tc.want {
				t.Errorf("%s, pages of %d: %q, want %q", tc.name, limit, got, tc.want)
			}
		}
	}
	// Previews: the last user text of each run's request, on pages of at most 50.
	if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: "run_g", DeploymentID: d.ID, Model: "m", Status: "ok", LatencyMs: 1,
		CreatedAt: ms(at.Add(171 * time.Minute)), Request: `{"messages":[{"role":"user","content":"What is\n the capital of France?"}]}`, Response: "{}"}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListRuns(ctx, pr, d.ID, RunFilter{Preview: true}, 2, "")
	if err != nil || len(page.Items) != 2 || page.Items[0].Preview != "What is the capital of France?" || page.Items[1].Preview != "" {
		t.Fatalf("previews: %+v, %v", page, err)
	}
	if page, err := s.ListRuns(ctx, pr, d.ID, RunFilter{}, 1, ""); err != nil || page.Items[0].Preview != "" {
		t.Fatalf("a preview nobody asked for: %+v, %v", page, err)
	}
	if _, err := s.ListRuns(ctx, pr, d.ID, RunFilter{Preview: true}, MaxPreviewPageSize+1, ""); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Errorf("a page of %d previews: %v, want invalid_request", MaxPreviewPageSize+1, err)
	}
	for _, f := range []RunFilter{{Status: "declined"}, {Arm: "blue"}, {Since: at, Until: at}} {
		if _, err := s.ListRuns(ctx, pr, d.ID, f, 10, ""); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
			t.Errorf("filter %+v: %v, want invalid_request", f, err)
		}
	}
}
