package core

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

const (
	defaultRunPage = 50
	maxRunPage     = 200
)

// ListRuns returns a page of a deployment's runs, newest first. The cursor is opaque to callers.
func (s *Service) ListRuns(ctx context.Context, pr Project, deploymentID string, limit int, cursor string) (*cloudapi.RunPage, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = defaultRunPage
	}
	if limit < 1 || limit > maxRunPage {
		return nil, errorf(CodeInvalidRequest, "limit must be between 1 and %d", maxRunPage)
	}
	p := dbsqlc.RunListByDeploymentParams{DeploymentID: d.ID, Lim: int64(limit) + 1}
	if cursor != "" {
		if p.CursorAt, p.CursorID, err = decodeCursor(cursor); err != nil {
			return nil, err
		}
	}
	rows, err := db.Q.RunListByDeployment(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	page := &cloudapi.RunPage{Runs: make([]cloudapi.RunSummary, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	for _, r := range rows {
		page.Runs = append(page.Runs, cloudapi.RunSummary{
			ID: r.ID, DeploymentID: r.DeploymentID, KeyID: nullStr(r.KeyID.String, r.KeyID.Valid), Model: r.Model,
			Status: r.Status, LatencyMs: r.LatencyMs, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CreatedAt: fromMs(r.CreatedAt), ExpiresAt: fromNullMs(r.ExpiresAt),
		})
	}
	return page, nil
}

// GetRun returns one run with its request and response.
func (s *Service) GetRun(ctx context.Context, pr Project, deploymentID, runID string) (*cloudapi.Run, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	r, err := db.Q.RunGet(ctx, s.db, dbsqlc.RunGetParams{ID: runID, DeploymentID: d.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, notFound("run")
		}
		return nil, err
	}
	return &cloudapi.Run{
		RunSummary: cloudapi.RunSummary{
			ID: r.ID, DeploymentID: r.DeploymentID, KeyID: nullStr(r.KeyID.String, r.KeyID.Valid), Model: r.Model,
			Status: r.Status, LatencyMs: r.LatencyMs, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CreatedAt: fromMs(r.CreatedAt), ExpiresAt: fromNullMs(r.ExpiresAt),
		},
		Request:  rawJSON(r.Request),
		Response: rawJSON(r.Response),
	}, nil
}

func rawJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func nullStr(s string, ok bool) *string {
	if !ok {
		return nil
	}
	return &s
}

func encodeCursor(at int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at, 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, error) {
	bad := errorf(CodeInvalidRequest, "cursor is not valid; pass the nextCursor of a previous page")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", bad
	}
	at, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || n <= 0 {
		return 0, "", bad
	}
	return n, id, nil
}
