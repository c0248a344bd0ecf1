package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/evalscore"
)

func (c *countingQuerier) RunResponse(ctx context.Context, q dbsqlc.DBTX, arg dbsqlc.RunResponseParams) (dbsqlc.RunResponseRow, error) {
	c.calls["RunResponse"]++
	return c.Querier.RunResponse(ctx, q, arg)
}

func (c *countingQuerier) RunResponsesByIDs(ctx context.Context, q dbsqlc.DBTX, arg dbsqlc.RunResponsesByIDsParams) ([]dbsqlc.RunResponsesByIDsRow, error) {
	c.calls["RunResponsesByIDs"]++
	return c.Querier.RunResponsesByIDs(ctx, q, arg)
}

func chatAnswer(content string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, content)
}

// An eval's preference export over several pages (both engines) writes, in the items' order, the line
// each judged pair makes from its two runs read one by one, and leaves out and counts the same pairs
// (failed, ties, a run no longer stored, a candidate's run missing, identical answers); its runs are
// read a page at a time, in one query per page.
func TestEvalExportPagesReadRunsInOneQuery(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := userProject(t, s, "evalexport@example.com")
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "evalexport", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*exportPage + 37 // three pages
	for i := range n {
		if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: fmt.Sprintf("run_src%017d", i), DeploymentID: d.ID, Model: "m", Status: "ok",
			LatencyMs: 1, CreatedAt: ms(now.Add(-time.Hour + time.Duration(i)*time.Millisecond)),
			Request:  fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}]}`, i),
			Response: chatAnswer(fmt.Sprintf("recorded %d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := s.CreateEval(ctx, pr, d.ID, NewEval{Candidate: edgemodel.Target{Kind: "base_model", Model: "m"}, Judge: &EvalJudge{Model: "m"},
		Runs: EvalRuns{Limit: n}}, "idn_a")
	if err != nil {
		t.Fatal(err)
	}
	if e.Progress.Total != n {
		t.Fatalf("eval of %d items, want %d", e.Progress.Total, n)
	}
	items, err := s.q.EvalItemPage(ctx, s.db, dbsqlc.EvalItemPageParams{EvalID: e.ID, After: 0, Lim: n}) // none finished yet
	if err != nil || len(items) != 0 {
		t.Fatalf("finished items before any: %d %v", len(items), err)
	}
	// Finish the items by hand, each kind of pair among them.
	rows, err := s.db.QueryContext(ctx, storetest.Rebind(s.db, "SELECT source_run_id, seq FROM eval_items WHERE eval_id = ? ORDER BY seq"), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		src string
		seq int64
	}
	var all []item
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.src, &it.seq); err != nil {
			t.Fatal(err)
		}
		all = append(all, it)
	}
	rows.Close()
	for i, it := range all {
		state, verdict, evalRun := "done", evalscore.VerdictCandidate, fmt.Sprintf("run_cand%016d", i)
		answer := chatAnswer(fmt.Sprintf("candidate %d", i))
		switch {
		case i%10 == 3:
			state = "failed"
		case i%10 == 5:
			verdict = evalscore.VerdictTie
		case i%2 == 1:
			verdict = evalscore.VerdictBaseline
		}
		if i%10 == 8 {
			var src dbsqlc.RunResponseRow
			if src, err = s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: it.src, DeploymentID: d.ID}); err != nil {
				t.Fatal(err)
			}
			answer = src.Response // the same answer twice: identical
		}
		if i%10 != 7 && state == "done" { // 7: the candidate's run never reached the store
			if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: evalRun, DeploymentID: d.ID, Model: "m", Status: "ok", LatencyMs: 1,
				CreatedAt: ms(*now), Request: "{}", Response: answer, Arm: edgemodel.ArmEval, EvalID: e.ID, EvalOf: it.src}); err != nil {
				t.Fatal(err)
			}
		}
		res, _ := json.Marshal(EvalResult{Verdict: verdict, Checks: []evalscore.Check{}})
		if _, err := s.db.ExecContext(ctx, storetest.Rebind(s.db, "UPDATE eval_items SET state = ?, eval_run_id = ?, result = ? WHERE eval_id = ? AND source_run_id = ?"),
			state, evalRun, string(res), e.ID, it.src); err != nil {
			t.Fatal(err)
		}
		if i%37 == 0 { // the source run is no longer stored
			if _, err := s.db.ExecContext(ctx, storetest.Rebind(s.db, "DELETE FROM runs WHERE id = ?"), it.src); err != nil {
				t.Fatal(err)
			}
		}
	}

	// What the export must write: each pair's line from its two runs read one by one.
	want := ExportCounts{Skipped: map[dataset.Reason]int{}}
	var wantOut bytes.Buffer
	opt := dataset.Options{Cut: e.Runs.Status == ExportStatusAll, Secret: s.ThinkingSecret,
		Previous: func(responseID string) (dataset.Run, bool) { return s.exportPrevious(ctx, d.ID, responseID) }}
	finished, err := s.q.EvalItemPage(ctx, s.db, dbsqlc.EvalItemPageParams{EvalID: e.ID, After: 0, Lim: n})
	if err != nil || len(finished) != n {
		t.Fatalf("finished items: %d %v", len(finished), err)
	}
	for _, r := range finished {
		res := resultOf(r)
		var line []byte
		var err error
		switch {
		case r.State != "done":
			err = &dataset.Refused{Reason: dataset.ReasonFailed}
		case res.Verdict != evalscore.VerdictCandidate && res.Verdict != evalscore.VerdictBaseline:
			err = &dataset.Refused{Reason: ReasonTie}
		default:
			src, serr := s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: r.SourceRunID, DeploymentID: d.ID})
			cand, cerr := s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: r.EvalRunID, DeploymentID: d.ID})
			switch {
			case serr != nil:
				err = &dataset.Refused{Reason: dataset.ReasonNoTranscript}
			case cerr != nil || cand.Response == "":
				err = &dataset.Refused{Reason: dataset.ReasonNoTranscript}
			default:
				line, err = dataset.EvalPreferenceLine(dataset.Run{ID: src.ID, Status: src.Status, Request: []byte(src.Request), Response: []byte(src.Response)},
					[]byte(cand.Response), res.Verdict == evalscore.VerdictCandidate, opt)
			}
		}
		if err != nil {
			want.Skipped[dataset.ReasonOf(err)]++
			continue
		}
		want.Written++
		wantOut.Write(line)
		wantOut.WriteByte('\n')
	}
	if want.Written < 100 || len(want.Skipped) != 4 {
		t.Fatalf("the eval's pairs: %+v, want over 100 lines and four reasons to leave pairs out", want)
	}

	calls := countQueries(s)
	var out bytes.Buffer
	flushes := 0
	got, err := s.ExportEval(ctx, pr, d.ID, e.ID, func(line []byte) error {
		out.Write(line)
		out.WriteByte('\n')
		return nil
	}, func() { flushes++ })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), wantOut.Bytes()) {
		t.Errorf("export differs from the pairs read one by one:\n got %d bytes\nwant %d bytes", out.Len(), wantOut.Len())
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if flushes != 3 {
		t.Errorf("%d flushes, want one a page (3)", flushes)
	}
	if calls.calls["RunResponse"] != 0 || calls.calls["RunResponsesByIDs"] != 3 {
		t.Errorf("runs read %v, want RunResponsesByIDs once a page (3)", calls.calls)
	}
}
