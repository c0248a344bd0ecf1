package cloudapi

import (
	"context"
	"net/http"
)

// ListJobs returns the training jobs registered in the client's project.
func (c *Client) ListJobs(ctx context.Context) ([]Job, error) {
	p, err := c.projectPath("jobs")
	if err != nil {
		return nil, err
	}
	var out struct {
		Jobs []Job `json:"jobs"`
	}
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// CreateJob registers a training job whose artifacts deployments can then serve.
func (c *Client) CreateJob(ctx context.Context, req CreateJobRequest) (*Job, error) {
	p, err := c.projectPath("jobs")
	if err != nil {
		return nil, err
	}
	var out Job
	if err := c.do(ctx, http.MethodPost, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetJob returns one training job.
func (c *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	p, err := c.projectPath("jobs", id)
	if err != nil {
		return nil, err
	}
	var out Job
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateJob adds checkpoints, sets the status or the final adapter of a job.
func (c *Client) UpdateJob(ctx context.Context, id string, req UpdateJobRequest) (*Job, error) {
	p, err := c.projectPath("jobs", id)
	if err != nil {
		return nil, err
	}
	var out Job
	if err := c.do(ctx, http.MethodPatch, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
