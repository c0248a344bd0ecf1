// Package cloudapi is the Go SDK of the svc management API (docs/API.md, "SDK (Go)").
package cloudapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultUserAgent is sent when Client.UserAgent is empty.
const DefaultUserAgent = "svc-cloudapi-go"

// defaultHTTPClient is shared by every Client without its own, so that connections are reused.
// The overall timeout is generous because run listings and one-click creation can be slow, but it
// still bounds a call to a server that accepted the connection and never answered.
var defaultHTTPClient = &http.Client{Timeout: 60 * time.Second}

// Client calls the management API. The zero value is not usable: set at least BaseURL.
// Client holds no mutable state, so one value may be shared by goroutines.
type Client struct {
	BaseURL     string // e.g. http://localhost:8080 (no trailing slash needed)
	Token       string // bearer token (anonymous or OAuth access token)
	OrgSlug     string // scope for project routes
	ProjectSlug string
	HTTPClient  *http.Client // nil = a shared default with sane timeouts
	UserAgent   string
}

// New returns a client for baseURL that authenticates with token, without a project scope.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: baseURL, Token: token}
}

// WithProject returns a copy of c scoped to one project; c itself is left unchanged.
func (c *Client) WithProject(orgSlug, projectSlug string) *Client {
	cp := *c
	cp.OrgSlug = orgSlug
	cp.ProjectSlug = projectSlug
	return &cp
}

// projectPath builds P/<segments...> with every segment escaped. It fails with missing_state
// before any network call when the client has no scope, so that an unscoped client never sends a
// request to a half-built path such as /v1/orgs//projects//deployments.
func (c *Client) projectPath(segments ...string) (string, error) {
	if c.OrgSlug == "" || c.ProjectSlug == "" {
		return "", &Error{
			Status: http.StatusBadRequest,
			Code:   CodeMissingState,
			Message: "no project scope: write .svc/state.json with orgSlug, projectSlug, projectId " +
				"(anonymous credentials create it automatically)",
		}
	}
	var b strings.Builder
	b.WriteString("/v1/orgs/")
	b.WriteString(url.PathEscape(c.OrgSlug))
	b.WriteString("/projects/")
	b.WriteString(url.PathEscape(c.ProjectSlug))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// send sends req with the client's token and user agent, through HTTPClient or else fallback. A
// transport error names the method and URL once.
func (c *Client) send(req *http.Request, fallback *http.Client) (*http.Response, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	ua := c.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	req.Header.Set("User-Agent", ua)
	hc := c.HTTPClient
	if hc == nil {
		hc = fallback
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error repeats the method and URL in a quoted form; say them once, plainly.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cloudapi: %s %s: %w", req.Method, req.URL, err)
	}
	return resp, nil
}

// do sends one request and decodes a 2xx JSON answer into out (nil: the body is discarded).
// path must already be escaped; query may be nil.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	if c.BaseURL == "" {
		return fmt.Errorf("cloudapi: %s %s: no base URL set", method, path)
	}
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("cloudapi: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("cloudapi: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(req, defaultHTTPClient)
	if err != nil {
		return err
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		// Drain so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("cloudapi: decode answer of %s %s (HTTP %d, %s): %w",
			method, path, resp.StatusCode, contentType(resp), err)
	}
	return nil
}
