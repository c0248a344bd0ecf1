package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/dataset"
)

// An export chooses runs by the arm that answered them: the calls clients made by default (a shadow
// copy is the canary's answer to a call already counted), the primary's (with the runs of no canary),
// or the canary's (its shadow copies included). A preference export writes a shadow pair where
// feedback prefers one answer, the preferred one as preferred_output, and counts the others unranked.
func TestExportByArmAndShadowPreferences(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "arms", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(-time.Hour)
	chat := func(question, answer string) (string, string) {
		return `{"model":"m","messages":[{"role":"user","content":"` + question + `"}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` + answer + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	}
	add := func(id, arm, shadowOf, question, answer string, i int) {
		req, resp := chat(question, answer)
		if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: id, DeploymentID: d.ID, Model: "m", Status: "ok", LatencyMs: 1,
			CreatedAt: ms(at.Add(time.Duration(i) * time.Second)), Request: req, Response: resp, Arm: arm, ShadowOf: shadowOf}); err != nil {
			t.Fatal(err)
		}
	}
	add("run_00000000000000before", "", "", "q0", "before the canary", 0)
	add("run_00000000000000primary", "primary", "", "q1", "the primary's answer", 1)
	add("run_00000000000000split", "canary", "", "q2", "a canary session", 2)
	add("run_00000000000000shadow", "canary", "run_00000000000000primary", "q1", "the canary's answer", 3)
	add("run_0000000000000primary2", "primary", "", "q3", "unranked primary", 4)
	add("run_00000000000000shadow2", "canary", "run_0000000000000primary2", "q3", "unranked canary", 5)

	export := func(req ExportRequest) ([]string, ExportCounts) {
		t.Helper()
		var lines []string
		counts, err := s.ExportRuns(ctx, pr, d.ID, req, func(line []byte) error { lines = append(lines, string(line)); return nil }, func() {})
		if err != nil {
			t.Fatal(err)
		}
		return lines, counts
	}
	answers := func(lines []string) string {
		var out []string
		for _, l := range lines {
			if err := dataset.ValidateChatLine([]byte(l)); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			var v struct{ Messages []struct{ Content string } }
			json.Unmarshal([]byte(l), &v)
			out = append(out, v.Messages[len(v.Messages)-1].Content)
		}
		return strings.Join(out, " | ")
	}
	for _, c := range []struct{ arm, want string }{
		{"", "before the canary | the primary's answer | a canary session | unranked primary"},
		{edgemodel.ArmPrimary, "before the canary | the primary's answer | unranked primary"},
		{edgemodel.ArmCanary, "a canary session | the canary's answer | unranked canary"},
	} {
		if lines, _ := export(ExportRequest{Format: ExportChat, Arm: c.arm}); answers(lines) != c.want {
			t.Errorf("arm %q: %s; want %s", c.arm, answers(lines), c.want)
		}
	}

	// The caller disliked the primary's answer; the canary's copy was scored better in the studio.
	if err := s.EdgeFeedback(ctx, d.ID, "run_00000000000000primary", -1, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.EdgeFeedback(ctx, d.ID, "run_00000000000000shadow", 1, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.EdgeFeedback(ctx, d.ID, "run_0000000000000primary2", 1, ""); err != nil {
		t.Fatal(err) // one side only: no preference
	}
	lines, counts := export(ExportRequest{Format: ExportPreference})
	if len(lines) != 1 || counts.Skipped[ReasonUnranked] != 1 {
		t.Fatalf("preference lines %q, counts %+v; want one line and one unranked pair", lines, counts)
	}
	if err := dataset.ValidatePreferenceLine([]byte(lines[0])); err != nil {
		t.Fatalf("%v: %s", err, lines[0])
	}
	var pref struct {
		Preferred    []struct{ Content string } `json:"preferred_output"`
		NonPreferred []struct{ Content string } `json:"non_preferred_output"`
	}
	json.Unmarshal([]byte(lines[0]), &pref)
	if len(pref.Preferred) != 1 || pref.Preferred[0].Content != "the canary's answer" || pref.NonPreferred[0].Content != "the primary's answer" {
		t.Fatalf("preference %s", lines[0])
	}
}
