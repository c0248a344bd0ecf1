package cloudapi

import (
	"context"
	"net/http"
)

// MintAnonymous creates an anonymous identity and returns its token. It needs no token itself.
func (c *Client) MintAnonymous(ctx context.Context) (*AnonymousToken, error) {
	var out AnonymousToken
	if err := c.do(ctx, http.MethodPost, "/v1/auth/anonymous", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Me returns the identity of the token with its orgs and projects.
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var out Me
	if err := c.do(ctx, http.MethodGet, "/v1/me", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AnonymousScope returns the org and project of an anonymous identity, creating them on the first
// call and returning the same ones afterwards. Signed-in identities get an error: they pick their
// project by hand.
func (c *Client) AnonymousScope(ctx context.Context) (*Scope, error) {
	var out Scope
	if err := c.do(ctx, http.MethodPost, "/v1/auth/anonymous/scope", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListModels returns the catalog: public models and registered base models.
func (c *Client) ListModels(ctx context.Context) ([]Model, error) {
	var out struct {
		Models []Model `json:"models"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/models", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Models, nil
}

// OneClick creates a deployment with the multi-model target, as the home page does. Anonymous
// ones expire after 7 days.
func (c *Client) OneClick(ctx context.Context) (*Deployment, error) {
	var out Deployment
	if err := c.do(ctx, http.MethodPost, "/v1/one-click", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
