package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/core"
)

// tokenError writes an error of the token endpoint in the shape of RFC 6749 section 5.2.
func tokenError(c echo.Context, status int, code, description string) error {
	return c.JSON(status, map[string]string{"error": code, "error_description": description})
}

// token is POST /oauth/token (form-encoded, RFC 6749 sections 4.1.3 and 6).
func (h *Handler) token(c echo.Context) error {
	// Tokens must never sit in a cache (RFC 6749 section 5.1).
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Pragma", "no-cache")
	req := c.Request()
	if err := req.ParseForm(); err != nil {
		if bodydeadline.Exceeded(err) {
			c.Response().Header().Set("Connection", "close") // the rest of the body is still on its way
			return tokenError(c, http.StatusRequestTimeout, "invalid_request", bodydeadline.Message)
		}
		return tokenError(c, http.StatusBadRequest, "invalid_request", "the body must be form-encoded (application/x-www-form-urlencoded)")
	}
	form := req.PostForm
	clientID := form.Get("client_id")
	switch grantType := form.Get("grant_type"); grantType {
	case "authorization_code":
		if clientID != cloudapi.CLIClientID {
			return tokenError(c, http.StatusUnauthorized, "invalid_client", "unknown client_id; this server serves client_id "+cloudapi.CLIClientID)
		}
		code, redirectURI, verifier := form.Get("code"), form.Get("redirect_uri"), form.Get("code_verifier")
		if code == "" || redirectURI == "" || verifier == "" {
			return tokenError(c, http.StatusBadRequest, "invalid_request", "code, redirect_uri and code_verifier are required")
		}
		g, ok, err := h.codes.take(req.Context(), code)
		switch {
		case err != nil:
			return err
		case !ok:
			return tokenError(c, http.StatusBadRequest, cloudapi.CodeInvalidGrant, "the code is unknown, expired (codes live 60 seconds) or already used; run svc login again")
		case g.clientID != clientID:
			return tokenError(c, http.StatusBadRequest, cloudapi.CodeInvalidGrant, "the code was issued to another client")
		case g.redirectURI != redirectURI:
			return tokenError(c, http.StatusBadRequest, cloudapi.CodeInvalidGrant, "redirect_uri differs from the one of the authorization request")
		case !pkceValue(verifier) || !s256Matches(verifier, g.challenge):
			return tokenError(c, http.StatusBadRequest, cloudapi.CodeInvalidGrant, "code_verifier does not match the code_challenge")
		}
		pair, err := h.svc.IssueTokenPair(req.Context(), g.identityID)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, tokenAnswer(pair))

	case "refresh_token":
		// A public client has no secret to prove; client_id is checked only when it is sent.
		if clientID != "" && clientID != cloudapi.CLIClientID {
			return tokenError(c, http.StatusUnauthorized, "invalid_client", "unknown client_id; this server serves client_id "+cloudapi.CLIClientID)
		}
		refresh := form.Get("refresh_token")
		if refresh == "" {
			return tokenError(c, http.StatusBadRequest, "invalid_request", "refresh_token is required")
		}
		pair, err := h.svc.Refresh(req.Context(), refresh)
		if errors.Is(err, core.ErrInvalidGrant) {
			return tokenError(c, http.StatusBadRequest, cloudapi.CodeInvalidGrant, "the refresh token is unknown, expired or already used; run svc login again")
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, tokenAnswer(pair))

	case "":
		return tokenError(c, http.StatusBadRequest, "invalid_request", "grant_type is required")
	default:
		return tokenError(c, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

func tokenAnswer(p *core.TokenPair) cloudapi.Token {
	return cloudapi.Token{AccessToken: p.AccessToken, TokenType: "Bearer", ExpiresIn: int64(p.ExpiresIn.Seconds()), RefreshToken: p.RefreshToken}
}

// s256Matches is the S256 check of RFC 7636 section 4.6, in constant time.
func s256Matches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}
