package core

import (
	"context"
	"database/sql"
	"errors"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// ListRuns returns a page of a deployment's runs, newest first. The cursor is opaque to callers.
func (s *Service) ListRuns(ctx context.Context, pr Project, deploymentID string, limit int, cursor string) (*Page[RunSummary], error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	if limit, err = pageLimit(limit, DefaultRunPageSize, MaxRunPageSize); err != nil {
		return nil, err
	}
	p := dbsqlc.RunListByDeploymentParams{DeploymentID: d.ID, Lim: int64(limit) + 1}
	if p.CursorAt, p.CursorID, err = decodeCursor(cursor); err != nil {
		return nil, err
	}
	rows, err := s.q.RunListByDeployment(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	page := &Page[RunSummary]{Items: make([]RunSummary, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	for _, r := range rows {
		page.Items = append(page.Items, RunSummary{
			ID: r.ID, DeploymentID: r.DeploymentID, KeyID: nullStr(r.KeyID.String, r.KeyID.Valid), Model: r.Model,
			Status: r.Status, LatencyMs: r.LatencyMs, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CreatedAt: fromMs(r.CreatedAt), ExpiresAt: fromNullMs(r.ExpiresAt),
			RequestID: r.RequestID, UpstreamRequestID: r.UpstreamRequestID,
			StatusCode: int(r.StatusCode), ErrorCode: r.ErrorCode, TraceID: r.TraceID, Replica: r.Replica, RetriedFrom: r.RetriedFrom, CachedTokens: r.CachedTokens,
			Arm: r.Arm, ArmTarget: r.ArmTarget, ShadowOf: r.ShadowOf, TTFTMs: r.TtftMs,
			Feedback: feedbackOf(r.FeedbackScore, r.FeedbackComment, r.FeedbackAt),
		})
	}
	return page, nil
}

// GetRun returns one run with its request and response.
func (s *Service) GetRun(ctx context.Context, pr Project, deploymentID, runID string) (*Run, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	r, err := s.q.RunGet(ctx, s.db, dbsqlc.RunGetParams{ID: runID, DeploymentID: d.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, notFound("run")
		}
		return nil, err
	}
	return &Run{
		RunSummary: RunSummary{
			ID: r.ID, DeploymentID: r.DeploymentID, KeyID: nullStr(r.KeyID.String, r.KeyID.Valid), Model: r.Model,
			Status: r.Status, LatencyMs: r.LatencyMs, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CreatedAt: fromMs(r.CreatedAt), ExpiresAt: fromNullMs(r.ExpiresAt),
			RequestID: r.RequestID, UpstreamRequestID: r.UpstreamRequestID,
			StatusCode: int(r.StatusCode), ErrorCode: r.ErrorCode, TraceID: r.TraceID, Replica: r.Replica, RetriedFrom: r.RetriedFrom, CachedTokens: r.CachedTokens,
			Arm: r.Arm, ArmTarget: r.ArmTarget, ShadowOf: r.ShadowOf, TTFTMs: r.TtftMs,
			Feedback: feedbackOf(r.FeedbackScore, r.FeedbackComment, r.FeedbackAt),
		},
		Request:  r.Request,
		Response: r.Response,
	}, nil
}

// feedbackOf is a run's feedback, nil when none was given.
func feedbackOf(score sql.NullInt64, comment string, at sql.NullInt64) *Feedback {
	if !score.Valid {
		return nil
	}
	return &Feedback{Score: int(score.Int64), Comment: comment, At: fromMs(at.Int64)}
}

func nullStr(s string, ok bool) *string {
	if !ok {
		return nil
	}
	return &s
}
