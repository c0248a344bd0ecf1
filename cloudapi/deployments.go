package cloudapi

import (
	"context"
	"net/http"
)

// ListDeployments returns every deployment of the client's project, newest first, following the
// pages of ListDeploymentsPage.
func (c *Client) ListDeployments(ctx context.Context) ([]Deployment, error) {
	var all []Deployment
	opts := ListOptions{Limit: maxPageSize}
	for {
		page, err := c.ListDeploymentsPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Deployments...)
		if page.NextCursor == "" {
			if all == nil {
				all = []Deployment{}
			}
			return all, nil
		}
		opts.Cursor = page.NextCursor
	}
}

// ListDeploymentsPage returns one page of the project's deployments, newest first.
func (c *Client) ListDeploymentsPage(ctx context.Context, opts ListOptions) (*DeploymentPage, error) {
	p, err := c.projectPath("deployments")
	if err != nil {
		return nil, err
	}
	var out DeploymentPage
	if err := c.do(ctx, http.MethodGet, p, opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateDeployment creates a deployment; unset optional fields take the server defaults.
func (c *Client) CreateDeployment(ctx context.Context, req CreateDeploymentRequest) (*Deployment, error) {
	p, err := c.projectPath("deployments")
	if err != nil {
		return nil, err
	}
	var out Deployment
	if err := c.do(ctx, http.MethodPost, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetDeployment returns one deployment.
func (c *Client) GetDeployment(ctx context.Context, id string) (*Deployment, error) {
	p, err := c.projectPath("deployments", id)
	if err != nil {
		return nil, err
	}
	var out Deployment
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateDeployment is updateDeployment of the SDK contract: a partial update in which only the non-nil fields
// of req change (target, auth mode, enabled, retention).
func (c *Client) UpdateDeployment(ctx context.Context, id string, req UpdateDeploymentRequest) (*Deployment, error) {
	p, err := c.projectPath("deployments", id)
	if err != nil {
		return nil, err
	}
	var out Deployment
	if err := c.do(ctx, http.MethodPatch, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteDeployment removes a deployment with its keys and run history.
func (c *Client) DeleteDeployment(ctx context.Context, id string) error {
	p, err := c.projectPath("deployments", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, p, nil, nil, nil)
}

// BulkDeployments applies one action (BulkEnable, BulkDisable, BulkDelete) to many deployments.
// A failure on one id is reported in its BulkResult, not as the returned error.
func (c *Client) BulkDeployments(ctx context.Context, req BulkRequest) ([]BulkResult, error) {
	p, err := c.projectPath("deployments", "bulk")
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []BulkResult `json:"results"`
	}
	if err := c.do(ctx, http.MethodPost, p, nil, req, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// RetargetDeployment changes the target with the shorthand of ParseTarget. Shorthands that
// refer to "the current job" are resolved against the deployment's target as read just before the
// update.
func (c *Client) RetargetDeployment(ctx context.Context, id, shorthand string) (*Deployment, error) {
	cur, err := c.GetDeployment(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := ParseTarget(shorthand, cur.Target)
	if err != nil {
		return nil, err
	}
	return c.UpdateDeployment(ctx, id, UpdateDeploymentRequest{Target: &t})
}
