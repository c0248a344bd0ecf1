package cloudapi

import (
	"context"
	"net/http"
	"net/url"
)

// CreateOrg creates an org whose member is the signed-in caller. Anonymous identities get 403
// forbidden; a taken slug gets 409 slug_taken.
func (c *Client) CreateOrg(ctx context.Context, slug string) (*Org, error) {
	var out Org
	if err := c.do(ctx, http.MethodPost, "/v1/orgs", nil, map[string]string{"slug": slug}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateProject creates a project in an org of which the caller is a member (404 for other orgs).
func (c *Client) CreateProject(ctx context.Context, orgSlug, slug string) (*Project, error) {
	var out Project
	path := "/v1/orgs/" + url.PathEscape(orgSlug) + "/projects"
	if err := c.do(ctx, http.MethodPost, path, nil, map[string]string{"slug": slug}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
