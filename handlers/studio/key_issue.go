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
	var req cloudapi.IssueKeyRequest
	f := views.KeyForm{EndpointID: id, BudgetErrors: map[string]string{}}
	if sentJSON(c) {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	} else {
		req.Label = formValue(c, "label")
		f.BudgetTokens, f.BudgetPeriod = strings.TrimSpace(formValue(c, "budgetTokens")), formValue(c, "budgetPeriod")
		if b, _ := budgetFromForm(f.BudgetTokens, f.BudgetPeriod, f.BudgetErrors).Get(); b != nil {
			req.Budget = &cloudapi.BudgetSet{Tokens: b.Tokens, Period: b.Period}
		}
	}
	req.Label = strings.TrimSpace(req.Label)
	f.Label = req.Label
	if len(f.BudgetErrors) > 0 {
		return renderHTML(c, http.StatusBadRequest, views.KeyFormView(f))
	}

	issued, err := s.issueKey(c, id, req)
	if err != nil {
		if !isHTMX(c) {
			return err
		}
		e := s.toAPIError(err)
		if e.Status >= 500 {
			return err
		}
		// The modal stays open with the message under the field it names (the label's by default).
		if field := budgetErrorField(e.Message); field != "" {
			f.BudgetErrors[field] = e.problem().Message
		} else {
			f.Error = e.problem().Message
		}
		return renderHTML(c, e.Status, views.KeyFormView(f))
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

func (s *Server) issueKey(c echo.Context, id string, req cloudapi.IssueKeyRequest) (*cloudapi.IssuedKey, error) {
	label := req.Label
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
	return cl.IssueDeploymentKeyWith(ctx, id, req)
}
