package core

import (
	"context"
	"errors"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/runs"
)

// RunIngester writes batches of runs shipped by edges (the run recorder, internal/recorder). core
// declares it rather than importing the recorder, so that svc edge, which imports core for its types,
// links no run writer.
type RunIngester interface {
	Ingest(ctx context.Context, b *runs.Batch, now time.Time) (runs.IngestResult, error)
}

// IngestRuns applies a batch of runs and key uses shipped by an svc edge process, once however often
// it is sent (docs/DEPLOY.md, "Runs and lastUsedAt"): the batch id is remembered for
// EdgeBatchRetention, runs keep their edge's ids, usage is added in the same transaction, and runs of
// deployments deleted meanwhile are dropped and counted.
func (s *Service) IngestRuns(ctx context.Context, b *runs.Batch) (runs.IngestResult, error) {
	if s.runs == nil {
		return runs.IngestResult{}, errors.New("core: this service was given no run writer (Options.Runs)")
	}
	return s.runs.Ingest(ctx, b, s.now())
}

// EdgeRun returns the request and response of one stored run of a deployment, for the edge's
// Responses API (GET /v1/responses/{id} and previous_response_id, a split canary's chains included),
// named by its run id or an id its caller got: svc's response id (made of its run's id), or the
// upstream's of a passed-through answer (runOfAnswerID). A run that was never stored (retention none),
// was deleted, or has expired is not found.
func (s *Service) EdgeRun(ctx context.Context, deploymentID, id string) (request, response []byte, err error) {
	runID, ok, err := s.runOfAnswerID(ctx, deploymentID, id)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, notFound("run")
	}
	r, err := s.q.RunGet(ctx, s.db, dbsqlc.RunGetParams{ID: runID, DeploymentID: deploymentID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, nil, notFound("run")
		}
		return nil, nil, err
	}
	if r.ExpiresAt.Valid && !fromMs(r.ExpiresAt.Int64).After(s.now()) {
		return nil, nil, notFound("run")
	}
	return []byte(r.Request), []byte(r.Response), nil
}
