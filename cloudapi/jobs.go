package cloudapi

import (
	"context"
	"net/http"
)

// ListJobs returns every training job registered in the client's project, newest first, following
// the pages of ListJobsPage.
func (c *Client) ListJobs(ctx context.Context) ([]Job, error) {
	var all []Job
	opts := ListOptions{Limit: maxPageSize}
	for {
		page, err := c.ListJobsPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == "" {
			if all == nil {
				all = []Job{}
			}
			return all, nil
		}
		opts.Cursor = page.NextCursor
	}
}

// ListJobsPage returns one page of the project's training jobs, newest first.
func (c *Client) ListJobsPage(ctx context.Context, opts ListOptions) (*JobPage, error) {
	p, err := c.projectPath("jobs")
	if err != nil {
		return nil, err
	}
	var out JobPage
	if err := c.do(ctx, http.MethodGet, p, opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
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
