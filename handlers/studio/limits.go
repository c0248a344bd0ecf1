package studio

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// Rate limits on the detail page: the deployment's card and each key's dialog. The studio turns the
// typed text into numbers and checks them against the cloud's range (core.MaxRateLimit) itself, so
// that the message under a field names the field as the form labels it; the cloud applies the rule
// again (core.ApplyRateLimits), and any other refusal is shown as a sentence under the field it names.

// limitFields are the form's field names, which are also the API's, with the labels the form shows.
var limitFields = []struct{ name, label string }{
	{"requestsPerMinute", "Requests per minute"},
	{"tokensPerMinute", "Tokens per minute"},
}

// limitRangeError is the message of a limit that is not a whole number in the allowed range.
func limitRangeError(label string) string {
	return label + " must be a whole number from 1 to " + views.Count(core.MaxRateLimit) + ", or empty for unlimited."
}

// limitsFromForm reads the two fields of a limits form: a whole number sets a limit, an empty field
// means unlimited. Anything else is refused here, with the form as typed.
func limitsFromForm(c echo.Context, f *views.LimitsForm) (cloudapi.LimitsUpdate, bool) {
	var u cloudapi.LimitsUpdate
	f.RequestsPerMinute = strings.TrimSpace(formValue(c, "requestsPerMinute"))
	f.TokensPerMinute = strings.TrimSpace(formValue(c, "tokensPerMinute"))
	for i, fl := range []struct {
		v   string
		dst *cloudapi.LimitChange
	}{{f.RequestsPerMinute, &u.RequestsPerMinute}, {f.TokensPerMinute, &u.TokensPerMinute}} {
		if fl.v == "" {
			*fl.dst = cloudapi.NoLimit()
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(fl.v, ",", ""))
		if err != nil || n < 1 || n > core.MaxRateLimit {
			setFieldError(f, limitFields[i].name, limitRangeError(limitFields[i].label))
			continue
		}
		*fl.dst = cloudapi.LimitTo(n)
	}
	return u, len(f.Errors) == 0
}

func setFieldError(f *views.LimitsForm, field, msg string) {
	if f.Errors == nil {
		f.Errors = map[string]string{}
	}
	f.Errors[field] = msg
}

// limitsError puts a refused update's message under the field it names (the cloud's messages name
// "limits.<field>"), or above the form. It reports false for errors that are not the user's to fix.
func (s *Server) limitsError(err error, f *views.LimitsForm) (int, bool) {
	e := s.toAPIError(err)
	if e.Status >= 500 || e.Status == http.StatusNotFound || e.Status == http.StatusForbidden {
		return e.Status, false
	}
	msg := e.problem().Message
	if field := budgetErrorField(e.Message); field != "" {
		setFieldError(f, field, msg)
		return e.Status, true
	}
	for _, fl := range limitFields {
		if strings.Contains(e.Message, fl.name) {
			setFieldError(f, fl.name, msg)
			return e.Status, true
		}
	}
	f.Message = msg
	return e.Status, true
}

// limitText is a limit as a form shows it: "" for unlimited.
func limitText(n *int) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(*n)
}

func limitsForm(endpointID string, l cloudapi.Limits) views.LimitsForm {
	return views.LimitsForm{EndpointID: endpointID, RequestsPerMinute: limitText(l.RequestsPerMinute), TokensPerMinute: limitText(l.TokensPerMinute)}
}

// deploymentLimitsUpdate is PATCH /api/deployments/{id} sent by the rate-limits card (HX-Target
// "limits"): the card comes back alone, saved or with the error under its field.
func (s *Server) deploymentLimitsUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	f := views.LimitsForm{EndpointID: id}
	u, ok := limitsFromForm(c, &f)
	if !ok {
		return renderHTML(c, http.StatusBadRequest, views.LimitsCard(f))
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.UpdateDeployment(ctx, id, cloudapi.UpdateDeploymentRequest{Limits: u})
	if err != nil {
		status, mine := s.limitsError(err, &f)
		if !mine {
			return err
		}
		return renderHTML(c, status, views.LimitsCard(f))
	}
	f = limitsForm(d.ID, d.Limits)
	f.Saved = true
	return renderHTML(c, http.StatusOK, views.LimitsCard(f))
}

// keyUpdate is PATCH /api/deployments/{id}/keys/{keyId}: a key's limits and budget. JSON callers send the SDK's
// UpdateKeyRequest and get the Key; the key's dialog gets the keys table back (which closes it), or
// its form with the error under the field.
func (s *Server) keyUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	id, keyID := c.Param("id"), c.Param("keyId")
	var req cloudapi.UpdateKeyRequest
	f := views.LimitsForm{EndpointID: id, KeyID: keyID}
	if sentJSON(c) {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	} else {
		u, _ := limitsFromForm(c, &f)
		f.BudgetTokens = strings.TrimSpace(formValue(c, "budgetTokens"))
		f.BudgetPeriod = formValue(c, "budgetPeriod")
		if f.Errors == nil {
			f.Errors = map[string]string{}
		}
		req.Budget = budgetFromForm(f.BudgetTokens, f.BudgetPeriod, f.Errors)
		if len(f.Errors) > 0 {
			return renderHTML(c, http.StatusBadRequest, views.KeyLimitsFormView(f))
		}
		req.Limits = u
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	k, err := cl.UpdateDeploymentKey(ctx, id, keyID, req)
	if err != nil {
		if !isHTMX(c) {
			return err
		}
		status, mine := s.limitsError(err, &f)
		if !mine {
			return err
		}
		return renderHTML(c, status, views.KeyLimitsFormView(f))
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, k)
	}
	table, err := s.keyTable(ctx, cl, id)
	if err != nil {
		return err
	}
	retarget(c, "#keys", "outerHTML")
	triggerAfterSettle(c, "svc:key-limits-saved", keyID)
	return renderHTML(c, http.StatusOK, views.KeyTable(table, false))
}

// withCalls fills in each key's calls of the last 24 hours. Best effort: the keys table still shows
// when usage cannot be read (the counts then read "—").
func (s *Server) withCalls(ctx context.Context, cl *cloudapi.Client, deploymentID string, keys []views.Key) []views.Key {
	u, err := cl.GetDeploymentUsage(ctx, deploymentID, cloudapi.UsageWindow(time.Now(), 24, cloudapi.GranularityHour))
	if err != nil {
		s.log.Warn("studio: key usage not read", "deployment", deploymentID, "err", err)
		return keys
	}
	calls := make(map[string]int64, len(u.Keys))
	for _, k := range u.Keys {
		calls[k.KeyID] = k.Requests
	}
	for i := range keys {
		keys[i].Calls24h = views.Count(calls[keys[i].ID])
	}
	return keys
}
