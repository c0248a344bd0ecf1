package core

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"regexp"
	"strings"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// CreateJob registers a training job in a project.
func (s *Service) CreateJob(ctx context.Context, pr Project, req cloudapi.CreateJobRequest) (*cloudapi.Job, error) {
	id := strings.ToLower(req.ID)
	if id == "" {
		id = NewUUID()
	} else if !uuidPattern.MatchString(id) {
		return nil, errorf(CodeInvalidRequest, "job id must be a UUID (got %q)", req.ID)
	}
	if req.BaseModel == "" {
		return nil, errorf(CodeInvalidRequest, "baseModel is required")
	}
	status := req.Status
	if status == "" {
		status = cloudapi.JobRunning
	}
	if err := validateJobStatus(status); err != nil {
		return nil, err
	}
	if err := validateArtifacts(req.FinalAdapter, req.Checkpoints); err != nil {
		return nil, err
	}
	now := ms(s.now())
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		err := db.Q.JobCreate(ctx, tx, dbsqlc.JobCreateParams{
			ID: id, ProjectID: pr.ID, BaseModel: req.BaseModel, Status: status,
			FinalAdapter: nullString(req.FinalAdapter), CreatedAt: now, UpdatedAt: now,
		})
		if err != nil {
			if errors.Is(db.Map(err), db.ErrUnique) {
				return errorf(CodeInvalidRequest, "a job with id %s already exists", id)
			}
			return err
		}
		return addCheckpoints(ctx, tx, id, req.Checkpoints, now)
	})
	if err != nil {
		return nil, err
	}
	return s.GetJob(ctx, pr, id)
}

// UpdateJob adds checkpoints and sets the status or the final adapter.
func (s *Service) UpdateJob(ctx context.Context, pr Project, id string, req cloudapi.UpdateJobRequest) (*cloudapi.Job, error) {
	if err := validateArtifacts(req.FinalAdapter, req.Checkpoints); err != nil {
		return nil, err
	}
	if req.Status != nil {
		if err := validateJobStatus(*req.Status); err != nil {
			return nil, err
		}
	}
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		job, err := db.Q.JobGet(ctx, tx, dbsqlc.JobGetParams{ID: id, ProjectID: pr.ID})
		if err != nil {
			if errors.Is(db.Map(err), db.ErrNotFound) {
				return notFound("job")
			}
			return err
		}
		if req.Status != nil {
			job.Status = *req.Status
		}
		if req.FinalAdapter != nil {
			job.FinalAdapter = nullString(req.FinalAdapter)
		}
		now := ms(s.now())
		if err := db.Q.JobUpdate(ctx, tx, dbsqlc.JobUpdateParams{ID: id, Status: job.Status, FinalAdapter: job.FinalAdapter, UpdatedAt: now}); err != nil {
			return err
		}
		return addCheckpoints(ctx, tx, id, req.Checkpoints, now)
	})
	if err != nil {
		return nil, err
	}
	// A job's artifacts feed the edge's deployment snapshots.
	s.edge.invalidate()
	return s.GetJob(ctx, pr, id)
}

// GetJob returns a job of the project.
func (s *Service) GetJob(ctx context.Context, pr Project, id string) (*cloudapi.Job, error) {
	job, err := db.Q.JobGet(ctx, s.db, dbsqlc.JobGetParams{ID: strings.ToLower(id), ProjectID: pr.ID})
	if err != nil {
		if errors.Is(db.Map(err), db.ErrNotFound) {
			return nil, notFound("job")
		}
		return nil, err
	}
	return s.jobOut(ctx, job)
}

// ListJobs returns the project's jobs, newest first.
func (s *Service) ListJobs(ctx context.Context, pr Project) ([]cloudapi.Job, error) {
	rows, err := db.Q.JobListByProject(ctx, s.db, pr.ID)
	if err != nil {
		return nil, err
	}
	out := make([]cloudapi.Job, 0, len(rows))
	for _, r := range rows {
		j, err := s.jobOut(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, *j)
	}
	return out, nil
}

func (s *Service) jobOut(ctx context.Context, j dbsqlc.Job) (*cloudapi.Job, error) {
	cps, err := db.Q.JobCheckpointList(ctx, s.db, j.ID)
	if err != nil {
		return nil, err
	}
	out := &cloudapi.Job{ID: j.ID, BaseModel: j.BaseModel, Status: j.Status, Checkpoints: []cloudapi.Checkpoint{}, CreatedAt: fromMs(j.CreatedAt)}
	if j.FinalAdapter.Valid {
		out.FinalAdapter = &j.FinalAdapter.String
	}
	for _, c := range cps {
		out.Checkpoints = append(out.Checkpoints, cloudapi.Checkpoint{Step: c.Step, Artifact: c.Artifact})
	}
	return out, nil
}

func addCheckpoints(ctx context.Context, tx *sql.Tx, jobID string, cps []cloudapi.Checkpoint, now int64) error {
	for _, c := range cps {
		if err := db.Q.JobCheckpointUpsert(ctx, tx, dbsqlc.JobCheckpointUpsertParams{JobID: jobID, Step: c.Step, Artifact: c.Artifact, CreatedAt: now}); err != nil {
			return err
		}
	}
	return nil
}

func validateJobStatus(status string) error {
	switch status {
	case cloudapi.JobRunning, cloudapi.JobCompleted, cloudapi.JobFailed:
		return nil
	}
	return errorf(CodeInvalidRequest, "job status must be %q, %q or %q", cloudapi.JobRunning, cloudapi.JobCompleted, cloudapi.JobFailed)
}

func validateArtifacts(final *string, cps []cloudapi.Checkpoint) error {
	if final != nil && strings.TrimSpace(*final) == "" {
		return errorf(CodeInvalidRequest, "finalAdapter must be an artifact URI or path")
	}
	for _, c := range cps {
		if c.Step < 1 {
			return errorf(CodeInvalidRequest, "checkpoint step must be 1 or more (got %d)", c.Step)
		}
		if strings.TrimSpace(c.Artifact) == "" {
			return errorf(CodeInvalidRequest, "checkpoint %d needs an artifact URI or path", c.Step)
		}
	}
	return nil
}

// artifactPresent reports whether an artifact can be served: file:// URIs and plain paths must exist on
// this server's disk; other schemes (s3://, hf://, ...) are taken as recorded.
func artifactPresent(uri string) bool {
	path, isFile := strings.CutPrefix(uri, "file://")
	if !isFile && strings.Contains(uri, "://") {
		return true
	}
	_, err := os.Stat(path)
	return err == nil
}

func nullString(p *string) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *p, Valid: true}
}
