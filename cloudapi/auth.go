package cloudapi

import (
	"context"
	"net/http"
	"net/url"
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

// AnonymousProject mints an anonymous identity (MintAnonymous) and returns a client that acts as it,
// scoped to its project (AnonymousScope): what a script or a test needs to make endpoints on a fresh
// `svc dev` in one call. The token is the returned client's Token.
func (c *Client) AnonymousProject(ctx context.Context) (*Client, error) {
	tok, err := c.MintAnonymous(ctx)
	if err != nil {
		return nil, err
	}
	cl := *c
	cl.Token = tok.Token
	scope, err := cl.AnonymousScope(ctx)
	if err != nil {
		return nil, err
	}
	return cl.WithProject(scope.OrgSlug, scope.ProjectSlug), nil
}

// ClaimAnonymous hands what an anonymous identity made to the signed-in caller (the client's token
// must be a signed-in one): the anonymous org and its endpoints become the caller's, the endpoints stop
// expiring, and anonymousToken stops working. svc login calls it when it finds anonymous credentials.
func (c *Client) ClaimAnonymous(ctx context.Context, anonymousToken string) (*Claim, error) {
	var out Claim
	if err := c.do(ctx, http.MethodPost, "/v1/auth/anonymous/claim", nil, map[string]string{"anonymousToken": anonymousToken}, &out); err != nil {
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

// GetModel returns one model of the catalog, with its replicas' state when it has some (Model.Fleet).
func (c *Client) GetModel(ctx context.Context, id string) (*Model, error) {
	var out Model
	if err := c.do(ctx, http.MethodGet, "/v1/models/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OneClick creates a deployment with the multi-model target, as the home page does. For anonymous
// callers it counts against the cap of 5 live endpoints and expires after 7 days, like every endpoint
// they create.
func (c *Client) OneClick(ctx context.Context) (*Deployment, error) {
	var out Deployment
	if err := c.do(ctx, http.MethodPost, "/v1/one-click", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
