package cloudapi

import (
	"context"
	"net/http"
)

// ListDeploymentKeys is listDeploymentKeys of the SDK contract: every key of a deployment, revoked ones
// included, with the best-effort LastUsedAt.
func (c *Client) ListDeploymentKeys(ctx context.Context, deploymentID string) ([]Key, error) {
	p, err := c.projectPath("deployments", deploymentID, "keys")
	if err != nil {
		return nil, err
	}
	var out struct {
		Keys []Key `json:"keys"`
	}
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// IssueDeploymentKey creates a key. The answer is the only time its plaintext is ever returned.
func (c *Client) IssueDeploymentKey(ctx context.Context, deploymentID, label string) (*IssuedKey, error) {
	return c.IssueDeploymentKeyWith(ctx, deploymentID, IssueKeyRequest{Label: label})
}

// RevokeDeploymentKey disables a key for good; the edge stops accepting it within about 30 s.
func (c *Client) RevokeDeploymentKey(ctx context.Context, deploymentID, keyID string) (*Key, error) {
	p, err := c.projectPath("deployments", deploymentID, "keys", keyID, "revoke")
	if err != nil {
		return nil, err
	}
	var out Key
	if err := c.do(ctx, http.MethodPost, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
