package core

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// CreateJob registers a training job in a project.
func (s *Service) CreateJob(ctx context.Context, pr Project, req NewJob) (*Job, error) {
	id := strings.ToLower(req.ID)
	if id == "" {
		id = NewUUID()
	} else if !uuidPattern.MatchString(id) {
		return nil, errorf(edgemodel.CodeInvalidRequest, "job id must be a UUID (got %q)", req.ID)
	}
	if req.BaseModel == "" {
		return nil, errorf(edgemodel.CodeInvalidRequest, "baseModel is required")
	}
	if !db.Storable(req.BaseModel) {
		return nil, errorf(edgemodel.CodeInvalidRequest, "baseModel must be valid UTF-8 without NUL characters")
	}
	status := JobRunning
	if req.Status != nil {
		status = *req.Status
	}
	if err := validateJobStatus(status); err != nil {
		return nil, err
	}
	if err := s.validateArtifacts(req.FinalAdapter, req.Checkpoints); err != nil {
		return nil, err
	}
	now := ms(s.now())
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		err := s.q.JobCreate(ctx, tx, dbsqlc.JobCreateParams{
			ID: id, ProjectID: pr.ID, BaseModel: req.BaseModel, Status: status,
			FinalAdapter: nullString(req.FinalAdapter), CreatedAt: now, UpdatedAt: now,
		})
		if err != nil {
			if errors.Is(db.Map(err), db.ErrUnique) {
				return errorf(edgemodel.CodeInvalidRequest, "a job with id %s already exists", id)
			}
			return err
		}
		return s.addCheckpoints(ctx, tx, id, req.Checkpoints, now)
	})
	if err != nil {
		return nil, err
	}
	return s.GetJob(ctx, pr, id)
}

// UpdateJob adds checkpoints and sets the status or the final adapter.
func (s *Service) UpdateJob(ctx context.Context, pr Project, id string, req JobChange) (*Job, error) {
	if err := s.validateArtifacts(req.FinalAdapter, req.Checkpoints); err != nil {
		return nil, err
	}
	if req.Status != nil {
		if err := validateJobStatus(*req.Status); err != nil {
			return nil, err
		}
	}
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		job, err := s.q.JobGet(ctx, tx, dbsqlc.JobGetParams{ID: id, ProjectID: pr.ID})
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
		if err := s.q.JobUpdate(ctx, tx, dbsqlc.JobUpdateParams{ID: id, Status: job.Status, FinalAdapter: job.FinalAdapter, UpdatedAt: now}); err != nil {
			return err
		}
		// A job's artifacts feed the edge's deployment snapshots.
		if err := tx.changedJob(ctx, id); err != nil {
			return err
		}
		return s.addCheckpoints(ctx, tx.Tx, id, req.Checkpoints, now)
	})
	if err != nil {
		return nil, err
	}
	return s.GetJob(ctx, pr, id)
}

// GetJob returns a job of the project.
func (s *Service) GetJob(ctx context.Context, pr Project, id string) (*Job, error) {
	job, err := s.q.JobGet(ctx, s.db, dbsqlc.JobGetParams{ID: strings.ToLower(id), ProjectID: pr.ID})
	if err != nil {
		if errors.Is(db.Map(err), db.ErrNotFound) {
			return nil, notFound("job")
		}
		return nil, err
	}
	return s.jobOut(ctx, job)
}

// ListJobs returns one page of the project's jobs, newest first (see PageLimit for limit; cursor is
// the NextCursor of the previous page, "" for the first).
func (s *Service) ListJobs(ctx context.Context, pr Project, limit int, cursor string) (*Page[Job], error) {
	limit, err := PageLimit(limit)
	if err != nil {
		return nil, err
	}
	p := dbsqlc.JobPageByProjectParams{ProjectID: pr.ID, Lim: int64(limit) + 1}
	if p.CursorAt, p.CursorID, err = decodeCursor(cursor); err != nil {
		return nil, err
	}
	rows, err := s.q.JobPageByProject(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	page := &Page[Job]{Items: make([]Job, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = encodeCursor(rows[limit-1].CreatedAt, rows[limit-1].ID)
	}
	for _, r := range rows {
		j, err := s.jobOut(ctx, r)
		if err != nil {
			return nil, err
		}
		page.Items = append(page.Items, *j)
	}
	return page, nil
}

func (s *Service) jobOut(ctx context.Context, j dbsqlc.Job) (*Job, error) {
	cps, err := s.q.JobCheckpointList(ctx, s.db, j.ID)
	if err != nil {
		return nil, err
	}
	out := &Job{ID: j.ID, BaseModel: j.BaseModel, Status: j.Status, Checkpoints: []Checkpoint{}, CreatedAt: fromMs(j.CreatedAt)}
	if j.FinalAdapter.Valid {
		out.FinalAdapter = &j.FinalAdapter.String
	}
	for _, c := range cps {
		out.Checkpoints = append(out.Checkpoints, Checkpoint{Step: c.Step, Artifact: c.Artifact})
	}
	return out, nil
}

func (s *Service) addCheckpoints(ctx context.Context, tx *sql.Tx, jobID string, cps []Checkpoint, now int64) error {
	for _, c := range cps {
		if err := s.q.JobCheckpointUpsert(ctx, tx, dbsqlc.JobCheckpointUpsertParams{JobID: jobID, Step: c.Step, Artifact: c.Artifact, CreatedAt: now}); err != nil {
			return err
		}
	}
	return nil
}

func validateJobStatus(status string) error {
	switch status {
	case JobRunning, JobCompleted, JobFailed:
		return nil
	}
	return errorf(edgemodel.CodeInvalidRequest, "job status must be %q, %q or %q", JobRunning, JobCompleted, JobFailed)
}

func (s *Service) validateArtifacts(final *string, cps []Checkpoint) error {
	if final != nil {
		if strings.TrimSpace(*final) == "" {
			return errorf(edgemodel.CodeInvalidRequest, "finalAdapter must be an artifact URI or path")
		}
		if err := s.artifactAllowed(*final); err != nil {
			return err
		}
	}
	for _, c := range cps {
		if c.Step < 1 {
			return errorf(edgemodel.CodeInvalidRequest, "checkpoint step must be 1 or more (got %d)", c.Step)
		}
		if strings.TrimSpace(c.Artifact) == "" {
			return errorf(edgemodel.CodeInvalidRequest, "checkpoint %d needs an artifact URI or path", c.Step)
		}
		if err := s.artifactAllowed(c.Artifact); err != nil {
			return err
		}
	}
	return nil
}

func nullString(p *string) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *p, Valid: true}
}
