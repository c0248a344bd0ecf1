package core

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/dataset"
)

// The rule of feedback ownership: a run of the deployment, stored and unexpired; everything else (an
// unknown id, another deployment's run, an expired one, a malformed id) is the one not-found error, and
// a run of another project's deployment is not reached through the API.
func TestFeedbackOwnership(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	pr, mine, theirs := mineAndTheirs(t, s)
	add := func(id, dep string, expires sql.NullInt64) {
		err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: id, DeploymentID: dep, Model: "m", Status: "ok", LatencyMs: 1,
			CreatedAt: ms(now.Add(-time.Hour)), ExpiresAt: expires, Request: "{}", Response: "{}"})
		if err != nil {
			t.Fatal(err)
		}
	}
	add("run_0000000000000mine", mine.ID, sql.NullInt64{})
	add("run_0000000000000theirs", theirs.ID, sql.NullInt64{})
	add("run_0000000000000old", mine.ID, sql.NullInt64{Int64: ms(now.Add(-time.Minute)), Valid: true})

	if err := s.EdgeFeedback(ctx, mine.ID, "chatcmpl-0000000000000mine", 1, "good"); err != nil {
		t.Fatal(err)
	}
	var want error
	for _, id := range []string{"msg_0000000000000theirs", "resp_0000000000000old", "chatcmpl-0000000000000none", "mine", "run_bad!"} {
		err := s.EdgeFeedback(ctx, mine.ID, id, 1, "")
		if edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
			t.Fatalf("%s: %v, want not found", id, err)
		}
		if want == nil {
			want = err
		} else if err.Error() != want.Error() {
			t.Errorf("%s: %q differs from %q", id, err, want)
		}
	}
	if err := s.EdgeFeedback(ctx, mine.ID, "run_0000000000000mine", 2, ""); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest || !strings.Contains(err.Error(), "score") {
		t.Errorf("score 2: %v", err)
	}
	if err := s.EdgeFeedback(ctx, mine.ID, "run_0000000000000mine", 1, strings.Repeat("é", edgemodel.MaxFeedbackComment+1)); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest || !strings.Contains(err.Error(), "comment") {
		t.Errorf("a long comment: %v", err)
	}
	// Through the API, a run is reached through its own deployment only, and another project's not at all.
	if _, err := s.SetRunFeedback(ctx, pr, mine.ID, "run_0000000000000theirs", Feedback{Score: -1}); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Errorf("another deployment's run: %v", err)
	}
	_, pr2 := anonymousProject(t, s)
	if _, err := s.SetRunFeedback(ctx, pr2, mine.ID, "run_0000000000000mine", Feedback{Score: -1}); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Errorf("another project's deployment: %v", err)
	}
	run, err := s.SetRunFeedback(ctx, pr, mine.ID, "run_0000000000000mine", Feedback{Score: -1, Comment: "changed my mind"})
	if err != nil || run.Feedback == nil || run.Feedback.Score != -1 || run.Feedback.Comment != "changed my mind" {
		t.Fatalf("%+v %v", run, err)
	}
	// Deleting the deployment removes its runs and their feedback.
	if err := s.DeleteDeployment(ctx, pr, mine.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.EdgeFeedback(ctx, mine.ID, "run_0000000000000mine", 1, ""); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Errorf("a deleted deployment's run: %v", err)
	}
}

// BenchmarkExportMemory exports a deployment of many runs and reports the heap's growth over the
// export (peak live heap sampled at each page, after a collection, minus the heap before): flat in the
// number of runs, since one page is held at a time. go test -run '^$' -bench ExportMemory -benchtime 1x
// ./internal/core/.
func BenchmarkExportMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, _ := newTestService(b)
			benchExport(b, s, n)
		})
	}
}

func benchExport(b *testing.B, s *Service, n int) {
	ctx := context.Background()
	p, pr := anonymousProject(b, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "big", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		b.Fatal(err)
	}
	req := `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes, run %d."}]}`
	resp := `{"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Foxes are quick and brown; this is answer %d, padded to a realistic length of a few hundred bytes so that the export moves real data."},"finish_reason":"stop"}]}`
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	base := ms(s.now().Add(-time.Hour))
	for i := 0; i < n; i++ {
		err := s.q.RunCreate(ctx, tx, dbsqlc.RunCreateParams{ID: fmt.Sprintf("run_%011x%06d", base, i), DeploymentID: d.ID, Model: "m", Status: "ok",
			LatencyMs: 1, CreatedAt: base + int64(i/10), Request: fmt.Sprintf(req, i), Response: fmt.Sprintf(resp, i)})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var ms0, m runtime.MemStats
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		peak, pages, bytes := uint64(0), 0, 0
		counts, err := s.ExportRuns(ctx, pr, d.ID, ExportRequest{Format: ExportChat}, func(line []byte) error {
			bytes += len(line) + 1
			return nil
		}, func() {
			pages++
			if pages%50 == 0 {
				runtime.GC()
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		})
		if err != nil || counts.Written != n {
			b.Fatalf("%+v %v", counts, err)
		}
		growth := float64(int64(peak)-int64(ms0.HeapAlloc)) / (1 << 20)
		b.ReportMetric(growth, "heap-growth-MiB")
		b.ReportMetric(float64(bytes)/(1<<20), "exported-MiB")
	}
}

// An export pages through runs that share their creation time across pages without losing or
// repeating one, oldest first, and leaves out what is outside [since, until) or expired; on both engines.
func TestExportPagesThroughTies(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "ties", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	base := ms(now.Add(-time.Hour))
	const n = 250
	for i := 0; i < n; i++ {
		var expires sql.NullInt64
		if i == 20 {
			expires = sql.NullInt64{Int64: ms(*now), Valid: true} // expired now
		}
		err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: fmt.Sprintf("run_%011x%06d", base, i), DeploymentID: d.ID, Model: "m", Status: "ok",
			LatencyMs: 1, CreatedAt: base + int64(i/7), ExpiresAt: expires,
			Request:  fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}]}`, i),
			Response: fmt.Sprintf(`{"id":"chatcmpl-x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"answer %d"},"finish_reason":"stop"}]}`, i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	counts, err := s.ExportRuns(ctx, pr, d.ID, ExportRequest{Format: ExportChat, Since: time.UnixMilli(base + 1)}, func(line []byte) error {
		got = append(got, string(line))
		return nil
	}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	// since leaves out the first 7 (created at base); run 20 has expired.
	if counts.Written != n-8 || len(got) != n-8 {
		t.Fatalf("%d written, %d lines; want %d", counts.Written, len(got), n-8)
	}
	next := 7
	for i, l := range got {
		if next == 20 {
			next++
		}
		if want := fmt.Sprintf(`"answer %d"`, next); !strings.Contains(l, want) {
			t.Fatalf("line %d lacks %s: %s", i, want, l)
		}
		next++
	}
}

// A passed-through Responses answer's run is found by the upstream's response id it keeps (feedback
// from another process than the one that answered, or after a restart), under the same rule: another
// deployment's run is the one not-found error.
func TestFeedbackByUpstreamResponseID(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	pr, mine, theirs := mineAndTheirs(t, s)
	err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: "run_0000000000000passed", DeploymentID: mine.ID, Model: "m", Status: "ok",
		LatencyMs: 1, CreatedAt: ms(now.Add(-time.Hour)), Request: "{}", Response: "{}", UpstreamResponseID: "resp_upstream-7f3a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EdgeFeedback(ctx, theirs.ID, "resp_upstream-7f3a", 1, ""); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("another deployment's: %v, want not found", err)
	}
	if err := s.EdgeFeedback(ctx, mine.ID, "resp_upstream-7f3a", -1, "off"); err != nil {
		t.Fatal(err)
	}
	run, err := s.GetRun(ctx, pr, mine.ID, "run_0000000000000passed")
	if err != nil {
		t.Fatal(err)
	}
	if run.Feedback == nil || run.Feedback.Score != -1 || run.Feedback.Comment != "off" {
		t.Fatalf("feedback %+v", run.Feedback)
	}
}

// An export writes a Responses run that continues a passed-through answer with its earlier turn: its
// previous_response_id is the upstream's id, which the earlier run keeps, found by the rule feedback
// uses (runOfAnswerID); another deployment's run of that id is not its earlier turn.
func TestExportFollowsAPassedThroughChain(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	pr, mine, theirs := mineAndTheirs(t, s)
	at := ms(now.Add(-time.Hour))
	response := func(id, text string) string {
		return fmt.Sprintf(`{"id":%q,"object":"response","status":"completed","model":"m","output":[{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}]}`, id, text)
	}
	for _, r := range []dbsqlc.RunCreateParams{
		{ID: "run_0000000000000first", DeploymentID: mine.ID, CreatedAt: at, UpstreamResponseID: "resp_upstream-1",
			Request: `{"model":"m","input":"first question"}`, Response: response("resp_upstream-1", "first answer")},
		{ID: "run_0000000000000second", DeploymentID: mine.ID, CreatedAt: at + 1, UpstreamResponseID: "resp_upstream-2",
			Request: `{"model":"m","input":"second question","previous_response_id":"resp_upstream-1"}`, Response: response("resp_upstream-2", "second answer")},
		// Another deployment's chain names an id only mine keeps.
		{ID: "run_0000000000000other", DeploymentID: theirs.ID, CreatedAt: at, UpstreamResponseID: "resp_upstream-3",
			Request: `{"model":"m","input":"other question","previous_response_id":"resp_upstream-1"}`, Response: response("resp_upstream-3", "other answer")},
	} {
		r.Model, r.Status, r.LatencyMs = "m", "ok", 1
		if err := s.q.RunCreate(ctx, s.db, r); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	counts, err := s.ExportRuns(ctx, pr, mine.ID, ExportRequest{Format: ExportChat}, func(line []byte) error {
		lines = append(lines, string(line))
		return nil
	}, func() {})
	if err != nil || counts.Written != 2 || len(lines) != 2 {
		t.Fatalf("%d lines, counts %+v, %v; want both turns", len(lines), counts, err)
	}
	want := `{"messages":[{"role":"user","content":"first question"},{"role":"assistant","content":"first answer"},{"role":"user","content":"second question"},{"role":"assistant","content":"second answer"}]}`
	if lines[1] != want {
		t.Errorf("the second turn:\n%s\nwant\n%s", lines[1], want)
	}
	counts, err = s.ExportRuns(ctx, pr, theirs.ID, ExportRequest{Format: ExportChat}, func([]byte) error { return nil }, func() {})
	if err != nil || counts.Written != 0 || counts.Skipped[dataset.ReasonNoPrevious] != 1 {
		t.Fatalf("another deployment's chain: counts %+v, %v; want left out as no_previous", counts, err)
	}
}

// mineAndTheirs makes two deployments of one anonymous project, "mine" and "theirs": the one whose runs
// a rule of ownership serves, and another whose runs it must not reach.
func mineAndTheirs(t *testing.T, s *Service) (Project, *Deployment, *Deployment) {
	t.Helper()
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	var deps [2]*Deployment
	for i, slug := range []string{"mine", "theirs"} {
		d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: slug, Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		deps[i] = d
	}
	return pr, deps[0], deps[1]
}
