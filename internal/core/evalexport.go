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
		func(after int64, _ string) ([]evalPair, error) { return s.evalPairPage(ctx, e.ID, d, after) },
		func(p evalPair) (int64, string) { return p.item.Seq, "" },
		func(p evalPair) ([]byte, error) {
			switch {
			case p.item.State != "done":
				return nil, &dataset.Refused{Reason: dataset.ReasonFailed}
			case !ranked(p.res):
				return nil, &dataset.Refused{Reason: ReasonTie}
			}
			src, ok := p.runs[p.item.SourceRunID]
			if !ok {
				return nil, &dataset.Refused{Reason: dataset.ReasonNoTranscript, Detail: "the source run is no longer stored"}
			}
			cand, ok := p.runs[p.item.EvalRunID]
			if !ok || cand.Response == "" {
				return nil, &dataset.Refused{Reason: dataset.ReasonNoTranscript, Detail: "the candidate's run is not stored"}
			}
			return dataset.EvalPreferenceLine(dataset.Run{ID: src.ID, Status: src.Status, Request: []byte(src.Request), Response: []byte(src.Response)},
				[]byte(cand.Response), p.res.Verdict == evalscore.VerdictCandidate, opt)
		}, write, flush)
	return counts, err
}

// evalPair is an eval item with its result and the runs of its page, by id: the page's pairs share
// one map, read with one query.
type evalPair struct {
	item dbsqlc.EvalItemPageRow
	res  EvalResult
	runs map[string]dbsqlc.RunResponsesByIDsRow
}

// ranked reports whether the judge preferred one answer of a pair.
func ranked(res EvalResult) bool {
	return res.Verdict == evalscore.VerdictCandidate || res.Verdict == evalscore.VerdictBaseline
}

// evalPairPage reads a page of an eval's finished items after the cursor and, in one query, the source
// and candidate runs of those the export writes a line for (done and ranked): a page of runs in memory
// at most, as a page of ExportRuns holds.
func (s *Service) evalPairPage(ctx context.Context, evalID, deploymentID string, after int64) ([]evalPair, error) {
	items, err := s.q.EvalItemPage(ctx, s.db, dbsqlc.EvalItemPageParams{EvalID: evalID, After: after, Lim: exportPage})
	if err != nil {
		return nil, err
	}
	pairs := make([]evalPair, len(items))
	var ids []string
	for i, it := range items {
		pairs[i] = evalPair{item: it, res: resultOf(it)}
		if it.State == "done" && ranked(pairs[i].res) {
			ids = append(ids, it.SourceRunID, it.EvalRunID)
		}
	}
	if len(ids) == 0 {
		return pairs, nil
	}
	rows, err := s.q.RunResponsesByIDs(ctx, s.db, dbsqlc.RunResponsesByIDsParams{DeploymentID: deploymentID, Ids: jsonIDs(ids)})
	if err != nil {
		return nil, err
	}
	runs := make(map[string]dbsqlc.RunResponsesByIDsRow, len(rows))
	for _, r := range rows {
		runs[r.ID] = r
	}
	for i := range pairs {
		pairs[i].runs = runs
	}
	return pairs, nil
}
