package studio

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// Token budgets and the queue bound on the detail page: the Settings' budget card (the deployment's
// budget and queueTimeoutMs) and each key's dialog (its budget beside its limits). As with the limits,
// the studio checks the typed text against the cloud's ranges (core.MaxBudgetTokens,
// core.MaxQueueTimeoutMs) so that the message under a field names it as the form labels it; the cloud
// applies the rules again (core.ValidateBudget, core.ValidateQueueTimeout), and its refusals are shown
// under the field they name.

// budgetFieldOf maps the names the cloud's messages use to the form's fields.
var budgetFieldOf = []struct{ api, field string }{
	{"budget.tokens", "budgetTokens"},
	{"budget.period", "budgetPeriod"},
	{"queueTimeoutMs", "queueTimeoutMs"},
}

// budgetFromForm reads a budget's two fields: a whole number of tokens sets the budget per the period,
// an empty field removes it (whatever the period). errs gets the message of a field typed wrong.
func budgetFromForm(tokens, period string, errs map[string]string) cloudapi.BudgetUpdate {
	if tokens == "" {
		return cloudapi.NoBudget()
	}
	if period != "day" && period != "month" {
		errs["budgetPeriod"] = "Choose a budget per day or per month."
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(tokens, ",", ""), 10, 64)
	if err != nil || n < 1 || n > core.MaxBudgetTokens {
		errs["budgetTokens"] = "Token budget must be a whole number from 1 to " + views.Count(core.MaxBudgetTokens) + ", or empty for none."
		return cloudapi.BudgetUpdate{}
	}
	if errs["budgetPeriod"] != "" {
		return cloudapi.BudgetUpdate{}
	}
	return cloudapi.SetBudget(n, period)
}

// budgetText is a budget as a form shows it: "" tokens for none, period "day" by default.
func budgetText(b *cloudapi.Budget) (tokens, period string) {
	if b == nil {
		return "", "day"
	}
	return strconv.FormatInt(b.Tokens, 10), b.Period
}

// budgetEdit is the budget card of a deployment as saved.
func budgetEdit(d cloudapi.Deployment) views.BudgetForm {
	f := views.BudgetForm{EndpointID: d.ID, Current: budgetView(d.Budget)}
	f.Tokens, f.Period = budgetText(d.Budget)
	if d.QueueTimeoutMs != nil {
		f.QueueTimeoutMs = strconv.Itoa(*d.QueueTimeoutMs)
	}
	return f
}

// budgetErrorField is the form field a refusal of the cloud names ("" for none).
func budgetErrorField(msg string) string {
	for _, b := range budgetFieldOf {
		if strings.Contains(msg, b.api) {
			return b.field
		}
	}
	return ""
}

// deploymentBudgetUpdate is PATCH /api/deployments/{id} sent by the budget card (HX-Target
// "budget-card"): budgetTokens, budgetPeriod and queueTimeoutMs in one SDK call. The card comes back
// alone, saved or with the error under its field.
func (s *Server) deploymentBudgetUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	f := views.BudgetForm{
		EndpointID: id, Errors: map[string]string{},
		Tokens:         strings.TrimSpace(formValue(c, "budgetTokens")),
		Period:         formValue(c, "budgetPeriod"),
		QueueTimeoutMs: strings.TrimSpace(formValue(c, "queueTimeoutMs")),
	}
	req := cloudapi.UpdateDeploymentRequest{Budget: budgetFromForm(f.Tokens, f.Period, f.Errors), QueueTimeoutMs: cloudapi.NoLimit()}
	if f.QueueTimeoutMs != "" {
		n, err := strconv.Atoi(strings.ReplaceAll(f.QueueTimeoutMs, ",", ""))
		if err != nil || n < 1 || n > core.MaxQueueTimeoutMs {
			f.Errors["queueTimeoutMs"] = "The longest wait must be a whole number of milliseconds from 1 to " + views.Count(core.MaxQueueTimeoutMs) + ", or empty for the model's."
		} else {
			req.QueueTimeoutMs = cloudapi.LimitTo(n)
		}
	}
	if len(f.Errors) > 0 {
		return renderHTML(c, http.StatusBadRequest, views.BudgetCard(f))
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.UpdateDeployment(ctx, id, req)
	if err != nil {
		e := s.toAPIError(err)
		if e.Status >= 500 || e.Status == http.StatusNotFound || e.Status == http.StatusForbidden {
			return err
		}
		if field := budgetErrorField(e.Message); field != "" {
			f.Errors[field] = e.problem().Message
		} else {
			f.Message = e.problem().Message
		}
		return renderHTML(c, e.Status, views.BudgetCard(f))
	}
	saved := budgetEdit(*d)
	saved.Saved = true
	return renderHTML(c, http.StatusOK, views.BudgetCard(saved))
}
