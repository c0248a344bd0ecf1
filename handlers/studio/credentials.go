package studio

import (
	"errors"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// credentialsBody describes the local files without the token: the page never needs it.
type credentialsBody struct {
	Present         bool            `json:"present"`
	Kind            string          `json:"kind,omitempty"`
	APIBaseURL      string          `json:"apiBaseUrl"`
	CredentialsPath string          `json:"credentialsPath"`
	StatePath       string          `json:"statePath"`
	State           *cloudapi.Scope `json:"state"`
}

// credentialsGet is GET /api/credentials: what the studio calls the cloud as. It reads files only.
func (s *Server) credentialsGet(c echo.Context) error {
	body, err := s.describeCredentials(c, false)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.IdentityBadge(identityView(body)), body)
}

// credentialsMint is POST /api/credentials: mints an anonymous token when no credentials file
// exists (docs/API.md, "Studio loopback routes"), and is a no-op otherwise.
func (s *Server) credentialsMint(c echo.Context) error {
	body, err := s.describeCredentials(c, true)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.IdentityBadge(identityView(body)), body)
}

func (s *Server) describeCredentials(c echo.Context, mint bool) (credentialsBody, error) {
	body := credentialsBody{
		APIBaseURL:      s.apiBaseURL,
		CredentialsPath: s.local.CredentialsPath,
		StatePath:       s.local.StatePath,
	}
	creds, err := s.local.Credentials(c.Request().Context(), mint)
	switch {
	case err == nil:
		body.Present, body.Kind = true, creds.Kind
	case !errors.Is(err, fs.ErrNotExist):
		return body, err
	}
	if st, err := cloudapi.LoadState(s.local.StatePath); err == nil {
		body.State = st
	}
	return body, nil
}

func identityView(b credentialsBody) views.Identity {
	id := views.Identity{Present: b.Present, Kind: b.Kind, APIBaseURL: b.APIBaseURL}
	if b.State != nil {
		id.Project = b.State.OrgSlug + "/" + b.State.ProjectSlug
	}
	return id
}
