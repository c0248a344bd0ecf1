package core

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/runs"
)

// Feedback on runs (docs/API.md, "Feedback"): a score of -1, 0 or 1 and an optional comment, given
// with the endpoint's key on the edge (the id the caller got: a completion, message or response id,
// all made of the run id) or on a run of the API. Kept in the run's row, removed with it, and counted
// in the hourly usage of the run's hour.

// Feedback is the feedback a run holds.
type Feedback struct {
	Score   int
	Comment string
	At      time.Time
}

// feedbackWait is how long feedback on a run made moments ago waits for the run to be written: runs
// are written in batches after the answer (an svc edge ships them later still), and a client may send
// feedback as soon as it has the answer. Runs made longer ago than feedbackRecent are never waited for.
const (
	feedbackWait   = 3 * time.Second
	feedbackRecent = 10 * time.Second
	feedbackPoll   = 50 * time.Millisecond
)

// ValidateFeedback checks a score and a comment (edgemodel.FeedbackProblem, the rule the edges judge
// by too), naming the field at fault.
func ValidateFeedback(score int, comment string) error {
	if _, msg := edgemodel.FeedbackProblem(score, comment); msg != "" {
		return errorf(edgemodel.CodeInvalidRequest, "%s", msg)
	}
	return nil
}

// SetRunFeedback gives feedback on a run of a deployment of the project (PUT .../runs/{runId}/feedback).
func (s *Service) SetRunFeedback(ctx context.Context, pr Project, deploymentID, runID string, f Feedback) (*Run, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	if err := s.setFeedback(ctx, d.ID, runID, f); err != nil {
		return nil, err
	}
	return s.GetRun(ctx, pr, deploymentID, runID)
}

// ClearRunFeedback removes the feedback of a run of a deployment of the project (DELETE
// .../runs/{runId}/feedback), taking its score out of the usage counts; a run without feedback is left
// as it is.
func (s *Service) ClearRunFeedback(ctx context.Context, pr Project, deploymentID, runID string) (*Run, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	if err := s.writeFeedback(ctx, d.ID, runID, nil); err != nil {
		return nil, err
	}
	return s.GetRun(ctx, pr, deploymentID, runID)
}

// EdgeFeedback gives feedback on a run of the deployment an edge serves, named by an id its caller got
// (a run, chat completion, message or response id). The rule of feedback ownership: the run must be
// this deployment's, stored and not expired; an id of no such run (malformed, unknown, another
// deployment's, never stored, expired) is one and the same not-found error, which says nothing of
// which. A run made moments ago that is not written yet is waited for (feedbackWait).
//
// A passed-through Responses answer carries the upstream's id, which its run keeps
// (upstream_response_id): that id is looked up first (runOfAnswerID), and is not waited for.
func (s *Service) EdgeFeedback(ctx context.Context, deploymentID, id string, score int, comment string) error {
	runID, ok, err := s.runOfAnswerID(ctx, deploymentID, id)
	if err != nil {
		return err
	}
	if !ok {
		return errFeedbackRun
	}
	return s.setFeedback(ctx, deploymentID, runID, Feedback{Score: score, Comment: comment})
}

// runOfAnswerID is the id of the run of a deployment that an id its caller got names (docs/API.md, "Ids
// are run ids"): the run that keeps it as the upstream's id of a passed-through Responses answer, else
// the run id the id is made of (which may not exist); ok is false for an id of neither form. Feedback
// and the export's previous_response_id chains read ids by this one rule.
func (s *Service) runOfAnswerID(ctx context.Context, deploymentID, id string) (runID string, ok bool, err error) {
	if id != "" && len(id) <= maxUpstreamResponseID {
		runID, err := s.q.RunIDByUpstreamResponse(ctx, s.db, dbsqlc.RunIDByUpstreamResponseParams{DeploymentID: deploymentID, UpstreamResponseID: id})
		switch err = db.Map(err); {
		case err == nil:
			return runID, true, nil
		case !errors.Is(err, db.ErrNotFound):
			return "", false, err
		}
	}
	runID, ok = runs.IDOf(id)
	return runID, ok, nil
}

// maxUpstreamResponseID bounds the ids looked up as an upstream's response id (OpenAI's and vLLM's are
// under 100 characters).
const maxUpstreamResponseID = 256

// errFeedbackRun is the one answer to feedback on a run that is not the deployment's to score.
var errFeedbackRun = &edgemodel.Error{Code: edgemodel.CodeNotFound, Message: "no run of this endpoint has this id (a run is kept as its retention says; an endpoint whose retention is none keeps none)"}

func (s *Service) setFeedback(ctx context.Context, deploymentID, runID string, f Feedback) error {
	if err := ValidateFeedback(f.Score, f.Comment); err != nil {
		return err
	}
	if f.At.IsZero() {
		f.At = s.now()
	}
	deadline := time.Now().Add(feedbackWait)
	for {
		err := s.writeFeedback(ctx, deploymentID, runID, &f)
		if !errors.Is(err, errFeedbackRun) || !recentRun(runID, s.now()) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(feedbackPoll):
		}
	}
}

// writeFeedback stores the feedback (nil: removes it) and moves the usage counts of the run's hour from
// its old score to the new one, in one transaction.
func (s *Service) writeFeedback(ctx context.Context, deploymentID, runID string, f *Feedback) error {
	return db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		r, err := s.q.RunFeedbackTarget(ctx, tx, dbsqlc.RunFeedbackTargetParams{ID: runID, DeploymentID: deploymentID})
		if err = db.Map(err); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return errFeedbackRun
			}
			return err
		}
		if r.ExpiresAt.Valid && !fromMs(r.ExpiresAt.Int64).After(s.now()) {
			return errFeedbackRun
		}
		if f == nil && !r.FeedbackScore.Valid {
			return nil // nothing to clear
		}
		set := dbsqlc.RunFeedbackSetParams{ID: runID, DeploymentID: deploymentID} // NULL score and time: none
		if f != nil {
			set.Score, set.Comment, set.At = sql.NullInt64{Int64: int64(f.Score), Valid: true}, f.Comment, sql.NullInt64{Int64: f.At.UnixMilli(), Valid: true}
		}
		if err := s.q.RunFeedbackSet(ctx, tx, set); err != nil {
			return err
		}
		usageKey := (&runs.Run{KeyID: r.KeyID.String, ShadowOf: r.ShadowOf, EvalOf: r.EvalOf}).UsageKey() // the row the recorder counted the run in
		add := dbsqlc.UsageFeedbackAddParams{DeploymentID: deploymentID, KeyID: usageKey, Hour: r.CreatedAt - r.CreatedAt%hourMs}
		count := func(score int64, by int64) {
			switch score {
			case 1:
				add.Up += by
			case -1:
				add.Down += by
			default:
				add.Neutral += by
			}
		}
		if r.FeedbackScore.Valid {
			count(r.FeedbackScore.Int64, -1)
		}
		if f != nil {
			count(int64(f.Score), 1)
		}
		if err := s.q.UsageFeedbackAdd(ctx, tx, add); err != nil {
			return err
		}
		if r.Arm == "" || r.EvalOf != "" {
			return nil // no canary; or an eval's replay, which no arm's usage counts
		}
		return s.q.UsageArmFeedbackAdd(ctx, tx, dbsqlc.UsageArmFeedbackAddParams{Up: add.Up, Down: add.Down, Neutral: add.Neutral,
			DeploymentID: deploymentID, CanaryID: r.CanaryID, Arm: r.Arm, ArmTarget: r.ArmTarget, Hour: add.Hour})
	})
}

const hourMs = int64(time.Hour / time.Millisecond)

// recentRun reports whether a run id was made within feedbackRecent of now (its first 11 hex digits
// after run_ are its millisecond, runs.NewID), so that feedback on it may wait for it to be written.
func recentRun(runID string, now time.Time) bool {
	tail := strings.TrimPrefix(runID, "run_")
	if len(tail) < 11 {
		return false
	}
	ms, err := strconv.ParseInt(tail[:11], 16, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.UnixMilli(ms))
	return age > -feedbackRecent && age < feedbackRecent
}
