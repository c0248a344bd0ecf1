package core

import (
	"context"
	"database/sql"
	"sort"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/dataset"
)

// The export of a deployment's runs as a fine-tuning dataset (docs/API.md, "Export"): runs are read a
// page at a time, oldest first, by (created_at, id), each page converted by internal/dataset and
// written before the next is read, so that an export of any number of runs holds one page in memory.

// Export formats.
const (
	ExportChat       = "chat-jsonl"
	ExportPreference = "preference-jsonl"
)

// Export statuses: the runs an export reads.
const (
	ExportStatusOK  = "ok"  // complete answers only (the default)
	ExportStatusAll = "all" // cut answers too, with what they delivered; failed runs have no answer to write
)

// exportPage is how many runs an export reads at a time.
const exportPage = 100

// ExportRequest chooses the runs an export writes and how.
type ExportRequest struct {
	Format       string
	Since, Until time.Time // [Since, Until); zero Since: from the first run, zero Until: now
	Arm          string    // "" for both
	Status       string    // ExportStatusOK (default) or ExportStatusAll
	MinScore     *int      // only runs whose feedback scored this or more, unscored ones counting 0; nil: every run
	Reasoning    bool      // keep reasoning as reasoning_content
}

// ExportCounts say what an export wrote and what it left out, by reason (dataset.Reason).
type ExportCounts struct {
	Written int
	Skipped map[dataset.Reason]int
}

// SkippedTotal is the number of runs left out.
func (c ExportCounts) SkippedTotal() int {
	n := 0
	for _, v := range c.Skipped {
		n += v
	}
	return n
}

// SkippedReasons are the reasons runs were left out, sorted.
func (c ExportCounts) SkippedReasons() []dataset.Reason {
	out := make([]dataset.Reason, 0, len(c.Skipped))
	for r := range c.Skipped {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ValidateExport checks an export's parameters, naming the one at fault, and fills in the defaults.
func ValidateExport(req *ExportRequest, now time.Time) error {
	switch req.Format {
	case ExportChat, ExportPreference:
	default:
		return errorf(edgemodel.CodeInvalidRequest, "format must be %q or %q", ExportChat, ExportPreference)
	}
	switch req.Status {
	case "":
		req.Status = ExportStatusOK
	case ExportStatusOK, ExportStatusAll:
	default:
		return errorf(edgemodel.CodeInvalidRequest, "status must be %q (complete answers, the default) or %q (cut answers too)", ExportStatusOK, ExportStatusAll)
	}
	switch req.Arm {
	case "", edgemodel.ArmPrimary, edgemodel.ArmCanary:
	default:
		return errorf(edgemodel.CodeInvalidRequest, "arm must be %q or %q", edgemodel.ArmPrimary, edgemodel.ArmCanary)
	}
	if req.MinScore != nil && (*req.MinScore < -1 || *req.MinScore > 1) {
		return errorf(edgemodel.CodeInvalidRequest, "minScore must be -1, 0 or 1")
	}
	if req.Format == ExportPreference {
		// A pair is a primary's run and its shadow copy (both arms), ranked by their feedback: the arm
		// and minScore filters cannot apply, and are refused rather than ignored.
		var named []string
		if req.Arm != "" {
			named = append(named, "arm")
		}
		if req.MinScore != nil {
			named = append(named, "minScore")
		}
		switch len(named) {
		case 1:
			return errorf(edgemodel.CodeInvalidRequest, "%s does not apply to format %s (a pair is a primary's run and its shadow copy, ranked by their feedback); leave it out", named[0], ExportPreference)
		case 2:
			return errorf(edgemodel.CodeInvalidRequest, "arm and minScore do not apply to format %s (a pair is a primary's run and its shadow copy, ranked by their feedback); leave them out", ExportPreference)
		}
	}
	if req.Until.IsZero() {
		req.Until = now
	}
	if !req.Since.Before(req.Until) {
		return errorf(edgemodel.CodeInvalidRequest, "since must be before until")
	}
	return nil
}

// ExportRuns writes a deployment's runs as lines of the request's format (each without its newline)
// through write, calling flush after each page, and returns what it wrote and left out. An error of
// write or flush (the client went away) ends it.
func (s *Service) ExportRuns(ctx context.Context, pr Project, deploymentID string, req ExportRequest, write func(line []byte) error, flush func()) (ExportCounts, error) {
	counts := ExportCounts{Skipped: map[dataset.Reason]int{}}
	if err := ValidateExport(&req, s.now()); err != nil {
		return counts, err
	}
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return counts, err
	}
	opt := dataset.Options{Reasoning: req.Reasoning, Cut: req.Status == ExportStatusAll, Secret: s.ThinkingSecret,
		Previous: func(responseID string) (dataset.Run, bool) { return s.exportPrevious(ctx, d.ID, responseID) }}
	if req.Format == ExportPreference {
		return s.exportPreferences(ctx, d.ID, req, opt, write, flush)
	}
	if req.MinScore == nil || *req.MinScore <= 0 {
		// A run svc kept no transcript of has no feedback either, and counts as unscored (0): a
		// minScore of 1 leaves it out unseen, as it does every unscored run.
		n, err := s.exportUnstored(ctx, d.ID, req)
		if err != nil {
			return counts, err
		}
		if n > 0 {
			counts.Skipped[dataset.ReasonNoTranscript] += n
		}
	}
	p := dbsqlc.RunExportPageParams{DeploymentID: d.ID, Since: ms(req.Since), Until: ms(req.Until),
		Now: sql.NullInt64{Int64: ms(s.now()), Valid: true}, Arm: req.Arm, Lim: exportPage}
	if req.MinScore != nil {
		p.HasMinScore, p.MinScore = 1, int64(*req.MinScore)
	}
	err = exportLines(ctx, &counts, ms(req.Since)-1,
		func(at int64, id string) ([]dbsqlc.RunExportPageRow, error) {
			p.CursorAt, p.CursorID = at, id
			return s.q.RunExportPage(ctx, s.db, p)
		},
		func(r dbsqlc.RunExportPageRow) (int64, string) { return r.CreatedAt, r.ID },
		func(r dbsqlc.RunExportPageRow) ([]byte, error) {
			return dataset.ChatLine(dataset.Run{ID: r.ID, Status: r.Status, Request: []byte(r.Request), Response: []byte(r.Response)}, opt)
		}, write, flush)
	return counts, err
}

// exportUnstored counts the answered calls of an export's window that svc keeps no transcript of
// (docs/API.md, "Export"): those of a deployment whose retention was none (recorded in the usage
// aggregates only), and those whose runs expired or were deleted. Usage is kept by the hour, so the
// count is of the hours the window touches: the answered calls of the usage aggregates in those hours
// (of the arm asked: every call, shadow copies included, for none; the canary's aggregates for canary;
// the rest for primary) less the answered runs stored in them, never below 0. Failed and cut calls are
// not counted: usage does not tell them apart, and a failed one would never be written.
func (s *Service) exportUnstored(ctx context.Context, deploymentID string, req ExportRequest) (int, error) {
	const hourMs = int64(time.Hour / time.Millisecond)
	from, to := max(ms(req.Since), 0), ms(req.Until)
	from -= from % hourMs
	if r := to % hourMs; r != 0 {
		to += hourMs - r
	}
	var answered int64
	var err error
	if req.Arm != edgemodel.ArmCanary {
		answered, err = s.q.UsageAnsweredInHours(ctx, s.db, dbsqlc.UsageAnsweredInHoursParams{DeploymentID: deploymentID, FromHour: from, ToHour: to})
		if err != nil {
			return 0, err
		}
	}
	if req.Arm != "" {
		canary, err := s.q.UsageArmAnsweredInHours(ctx, s.db, dbsqlc.UsageArmAnsweredInHoursParams{DeploymentID: deploymentID, Arm: edgemodel.ArmCanary, FromHour: from, ToHour: to})
		if err != nil {
			return 0, err
		}
		if req.Arm == edgemodel.ArmCanary {
			answered = canary
		} else {
			answered -= canary
		}
	}
	stored, err := s.q.RunCountAnswered(ctx, s.db, dbsqlc.RunCountAnsweredParams{DeploymentID: deploymentID, FromAt: from, ToAt: to,
		Now: sql.NullInt64{Int64: ms(s.now()), Valid: true}, Arm: req.Arm})
	if err != nil {
		return 0, err
	}
	return int(max(answered-stored, 0)), nil
}

// exportPreferences writes the preference lines of a deployment's shadow pairs: a primary's run and
// the canary's copy of its call, where feedback prefers one (both scored, one higher than the other;
// docs/API.md, "Export"). Pairs without such a preference are left out, counted as unranked, and so are
// pairs whose two answers are the same, counted as identical (a pair that teaches nothing); the arm and
// minScore filters do not apply (a pair is both arms; ValidateExport refuses them).
func (s *Service) exportPreferences(ctx context.Context, deploymentID string, req ExportRequest, opt dataset.Options, write func([]byte) error, flush func()) (ExportCounts, error) {
	counts := ExportCounts{Skipped: map[dataset.Reason]int{}}
	p := dbsqlc.RunShadowPairPageParams{DeploymentID: deploymentID, Since: ms(req.Since), Until: ms(req.Until),
		Now: sql.NullInt64{Int64: ms(s.now()), Valid: true}, Lim: exportPage}
	err := exportLines(ctx, &counts, ms(req.Since)-1,
		func(at int64, id string) ([]dbsqlc.RunShadowPairPageRow, error) {
			p.CursorAt, p.CursorID = at, id
			return s.q.RunShadowPairPage(ctx, s.db, p)
		},
		func(r dbsqlc.RunShadowPairPageRow) (int64, string) { return r.CreatedAt, r.ID },
		func(r dbsqlc.RunShadowPairPageRow) ([]byte, error) {
			shadow := dataset.Run{ID: r.ID, Status: r.Status, Request: []byte(r.Request), Response: []byte(r.Response)}
			primary := dataset.Run{ID: r.PrimaryID, Status: r.PrimaryStatus, Request: []byte(r.PrimaryRequest), Response: []byte(r.PrimaryResponse)}
			if !r.FeedbackScore.Valid || !r.PrimaryScore.Valid || r.FeedbackScore.Int64 == r.PrimaryScore.Int64 {
				return nil, &dataset.Refused{Reason: ReasonUnranked}
			}
			preferred, other := primary, shadow
			if r.FeedbackScore.Int64 > r.PrimaryScore.Int64 {
				preferred, other = shadow, primary
			}
			return dataset.PreferenceLine(preferred, other, opt)
		}, write, flush)
	return counts, err
}

// exportLines pages through rows oldest first (page reads those after a cursor, exportPage at most),
// turns each into a line (a row the conversion refuses is left out and counted by its reason), writes
// the lines and flushes after each page, so that an export of any size is one page in memory. An
// error of write or flush (the client went away) ends it.
func exportLines[R any](ctx context.Context, counts *ExportCounts, from int64, page func(cursorAt int64, cursorID string) ([]R, error),
	cursor func(R) (int64, string), line func(R) ([]byte, error), write func([]byte) error, flush func()) error {
	at, id := from, ""
	for {
		rows, err := page(at, id)
		if err != nil {
			return err
		}
		for _, r := range rows {
			l, err := line(r)
			if err != nil {
				counts.Skipped[dataset.ReasonOf(err)]++
				continue
			}
			if err := write(l); err != nil {
				return err
			}
			counts.Written++
		}
		flush()
		if len(rows) < exportPage {
			return ctx.Err()
		}
		at, id = cursor(rows[len(rows)-1])
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// ReasonUnranked counts the shadow pairs a preference export leaves out because feedback does not
// prefer one of the two answers (one or both unscored, or scored alike).
const ReasonUnranked dataset.Reason = "unranked"

// exportPrevious reads the earlier turn of a Responses run's chain (previous_response_id names it by
// the response id its caller got: svc's, or a passed-through answer's upstream id), of the same
// deployment, for dataset.Options.Previous.
func (s *Service) exportPrevious(ctx context.Context, deploymentID, responseID string) (dataset.Run, bool) {
	runID, ok, err := s.runOfAnswerID(ctx, deploymentID, responseID)
	if err != nil || !ok {
		return dataset.Run{}, false
	}
	r, err := s.q.RunGet(ctx, s.db, dbsqlc.RunGetParams{ID: runID, DeploymentID: deploymentID})
	if err != nil {
		return dataset.Run{}, false // gone, or unreadable: the run is left out as no_previous
	}
	if r.ExpiresAt.Valid && !fromMs(r.ExpiresAt.Int64).After(s.now()) {
		return dataset.Run{}, false
	}
	return dataset.Run{ID: r.ID, Status: r.Status, Request: []byte(r.Request), Response: []byte(r.Response)}, true
}
