package studio

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// keyIssue is POST /api/deployments/{id}/keys. The plaintext goes to the caller once and is kept
// nowhere: not logged, not cached (render sets no-store).
func (s *Server) keyIssue(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var label string
	if sentJSON(c) {
		var body struct {
			Label string `json:"label"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		label = body.Label
	} else {
		label = formValue(c, "label")
	}
	label = strings.TrimSpace(label)

	issued, err := s.issueKey(c, id, label)
	if err != nil {
		if !isHTMX(c) {
			return err
		}
		e := s.toAPIError(err)
		if e.Status >= 500 {
			return err
		}
		// The modal stays open with the message under the label field.
		return renderHTML(c, e.Status, views.KeyFormView(views.KeyForm{EndpointID: id, Label: label, Error: e.problem().Message}))
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusCreated, issued)
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	ks, err := cl.ListDeploymentKeys(ctx, id)
	if err != nil {
		return err
	}
	// Keys exist only in fixed_api_key mode, so the table is that mode's.
	table := views.Keys{EndpointID: id, AuthMode: cloudapi.AuthFixedAPIKey, Keys: s.withCalls(ctx, cl, id, keyViews(ks))}
	return renderHTML(c, http.StatusCreated, views.KeyIssuedView(views.IssuedKey{
		Label: issued.Key.Label, Plaintext: issued.Plaintext, Keys: table,
	}))
}

func (s *Server) issueKey(c echo.Context, id, label string) (*cloudapi.IssuedKey, error) {
	// The studio prompts for 1 to 80 characters itself, so the dialog answers at once; the cloud
	// applies the full rule (core.ValidateLabel) again.
	if n := utf8.RuneCountInString(label); n < 1 || n > core.LabelMaxLen {
		return nil, badRequest("invalid_label", fmt.Sprintf("Enter a label of 1 to %d characters.", core.LabelMaxLen))
	}
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return nil, err
	}
	return cl.IssueDeploymentKey(ctx, id, label)
}
