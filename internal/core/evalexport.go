package core

import (
	"context"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/evalscore"
)

// ReasonTie counts the judged pairs an eval's preference export leaves out because the judge
// preferred neither answer (a tie, or a verdict that flipped when the answers were swapped).
const ReasonTie dataset.Reason = "tie"

// ExportEval writes an eval's judged pairs as preference lines (docs/API.md, "Evals"), in the items'
// order, a page at a time as ExportRuns does: for each pair the judge ranked, the source run's
// conversation, the answer it preferred and the other (the recorded answer, or the candidate's from the
// item's eval run). Ties are left out and counted as tie; items that were not replayed as failed; the
// pairs dataset.EvalPreferenceLine refuses (tool calls, identical answers, a run no longer stored) by
// their reason. An eval without a judge has no ranking to write: 400.
func (s *Service) ExportEval(ctx context.Context, pr Project, deploymentID, evalID string, write func(line []byte) error, flush func()) (ExportCounts, error) {
	counts := ExportCounts{Skipped: map[dataset.Reason]int{}}
	e, err := s.GetEval(ctx, pr, deploymentID, evalID)
	if err != nil {
		return counts, err
	}
	if e.Judge == nil {
		return counts, errorf(edgemodel.CodeInvalidRequest, "eval %q has no judge: its pairs are not ranked, so there are no preferences to export (create an eval with a judge)", evalID)
	}
	d := e.DeploymentID
	opt := dataset.Options{Cut: e.Runs.Status == ExportStatusAll, Secret: s.ThinkingSecret,
		Previous: func(responseID string) (dataset.Run, bool) { return s.exportPrevious(ctx, d, responseID) }}
	err = exportLines(ctx, &counts, 0,
		func(after int64, _ string) ([]dbsqlc.EvalItemPageRow, error) {
			return s.q.EvalItemPage(ctx, s.db, dbsqlc.EvalItemPageParams{EvalID: e.ID, After: after, Lim: exportPage})
		},
		func(r dbsqlc.EvalItemPageRow) (int64, string) { return r.Seq, "" },
		func(r dbsqlc.EvalItemPageRow) ([]byte, error) {
			res := resultOf(r)
			switch {
			case r.State != "done":
				return nil, &dataset.Refused{Reason: dataset.ReasonFailed}
			case res.Verdict != evalscore.VerdictCandidate && res.Verdict != evalscore.VerdictBaseline:
				return nil, &dataset.Refused{Reason: ReasonTie}
			}
			src, err := s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: r.SourceRunID, DeploymentID: d})
			if err != nil {
				return nil, &dataset.Refused{Reason: dataset.ReasonNoTranscript, Detail: "the source run is no longer stored"}
			}
			cand, err := s.q.RunResponse(ctx, s.db, dbsqlc.RunResponseParams{ID: r.EvalRunID, DeploymentID: d})
			if err != nil || cand.Response == "" {
				return nil, &dataset.Refused{Reason: dataset.ReasonNoTranscript, Detail: "the candidate's run is not stored"}
			}
			return dataset.EvalPreferenceLine(dataset.Run{ID: src.ID, Status: src.Status, Request: []byte(src.Request), Response: []byte(src.Response)},
				[]byte(cand.Response), res.Verdict == evalscore.VerdictCandidate, opt)
		}, write, flush)
	return counts, err
}
