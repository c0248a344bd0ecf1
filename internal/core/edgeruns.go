package core

import (
	"context"
	"errors"
	"time"

	"github.com/svcdev/svc/internal/runs"
)

// RunIngester writes batches of runs shipped by edges (the run recorder, internal/recorder). core
// declares it rather than importing the recorder, so that svc edge, which imports core for its types,
// links no run writer.
type RunIngester interface {
	Ingest(ctx context.Context, b runs.Batch, now time.Time) (runs.IngestResult, error)
}

// IngestRuns applies a batch of runs and key uses shipped by an svc edge process, once however often
// it is sent (docs/DEPLOY.md, "Runs and lastUsedAt"): the batch id is remembered for
// EdgeBatchRetention, runs keep their edge's ids, usage is added in the same transaction, and runs of
// deployments deleted meanwhile are dropped and counted.
func (s *Service) IngestRuns(ctx context.Context, b runs.Batch) (runs.IngestResult, error) {
	if s.runs == nil {
		return runs.IngestResult{}, errors.New("core: this service was given no run writer (Options.Runs)")
	}
	return s.runs.Ingest(ctx, b, s.now())
}
