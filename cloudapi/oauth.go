package cloudapi

import (
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

// CLIClientID is the OAuth client id of the svc CLI: a public client on a loopback redirect
// (RFC 8252), so it has no secret and proves itself with PKCE instead.
const CLIClientID = "svc-cli"

// CodeInvalidGrant is the RFC 6749 error of a code or refresh token that is unknown, expired, used
// or bound to something else.
const CodeInvalidGrant = "invalid_grant"

// Token is the answer of POST /oauth/token (RFC 6749 section 5.1).
type Token struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"` // seconds
	RefreshToken string `json:"refresh_token"`
}

// Credentials turns a token answer received at time now into the credentials file's form.
func (t *Token) Credentials(apiBaseURL string, now time.Time) *Credentials {
	exp := now.Add(time.Duration(t.ExpiresIn) * time.Second).UTC()
	return &Credentials{APIBaseURL: apiBaseURL, Kind: KindOAuth, Token: t.AccessToken, RefreshToken: t.RefreshToken, ExpiresAt: &exp}
}

// RefreshToken trades a refresh token for a new access token and a new refresh token; the old
// refresh token stops working (rotation).
func RefreshToken(ctx context.Context, baseURL, refreshToken string) (*Token, error) {
	return refreshWith(ctx, nil, baseURL, refreshToken)
}

func refreshWith(ctx context.Context, hc *http.Client, baseURL, refreshToken string) (*Token, error) {
	return postToken(ctx, hc, baseURL, url.Values{
		"grant_type": {"refresh_token"}, "client_id": {CLIClientID}, "refresh_token": {refreshToken},
	})
}

// postToken calls the token endpoint. Its errors have the RFC 6749 shape
// {"error": "invalid_grant", "error_description": "…"}, not the management API's envelope; they
// come back as *Error all the same, with the RFC's code.
func postToken(ctx context.Context, hc *http.Client, baseURL string, form url.Values) (*Token, error) {
	u := strings.TrimRight(baseURL, "/") + "/oauth/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("cloudapi: POST %s: %w", u, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", DefaultUserAgent)
	if hc == nil {
		hc = defaultHTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cloudapi: POST %s: %w", u, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode != http.StatusOK {
		var oe struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(raw, &oe) == nil && oe.Error != "" {
			return nil, &Error{Status: resp.StatusCode, Code: oe.Error, Message: oe.Description}
		}
		return nil, &Error{Status: resp.StatusCode, Code: httpCode(resp.StatusCode), Message: describeBody(resp, raw)}
	}
	var tok Token
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" {
		return nil, fmt.Errorf("cloudapi: POST %s: the answer is not a token (%s)", u, contentType(resp))
	}
	return &tok, nil
}
