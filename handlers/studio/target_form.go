package studio

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// The forms that pick a target after creation (the canary form, the Settings' Target card) and the
// run retention card: each error under its field, as the create form shows them.

// targetFormFrom reads a target picker's fields (and a canary form's percent and mode).
func targetFormFrom(c echo.Context, endpointID string) views.TargetForm {
	return views.TargetForm{EndpointID: endpointID, Kind: formValue(c, "kind"), JobID: strings.TrimSpace(formValue(c, "jobId")),
		Step: strings.TrimSpace(formValue(c, "step")), Model: strings.TrimSpace(formValue(c, "model")),
		Percent: strings.TrimSpace(formValue(c, "percent")), Mode: formValue(c, "mode")}
}

// targetOf checks a picker by the create form's rules (an empty picker, a step that is no number).
func targetOf(f views.TargetForm) (cloudapi.Target, *fieldError) {
	form := createForm{Slug: "-", AuthMode: cloudapi.AuthFixedAPIKey, Kind: f.Kind, JobID: f.JobID, Step: f.Step, Model: f.Model}
	req, fe := form.request()
	return req.Target, fe
}

// targetFormError puts a refused form's error under the field it is about (the picker's, the share, the
// mode), or above the form. It reports false for errors that are not the form's to fix.
func (s *Server) targetFormError(c echo.Context, err error, f *views.TargetForm) (int, bool) {
	var field string
	var fe *fieldError
	if errors.As(err, &fe) {
		field, err = fe.field, fe.apiError
		if field == "step" && f.JobID != "" {
			field, err = "step", s.stepError(c.Request().Context(), f.JobID, fe).apiError
		}
	}
	e := s.toAPIError(err)
	if e.Status >= 500 || e.Status == http.StatusNotFound || e.Status == http.StatusForbidden {
		return e.Status, false
	}
	if field == "" {
		switch {
		case e.Code == "invalid_target":
			field = createField(e, f.Kind)
		case strings.Contains(e.Message, "percent"):
			field = "percent"
		case strings.Contains(e.Message, "canary.mode"):
			field = "mode"
		}
	}
	msg := e.problem().Message
	if field != "" {
		f.Errors = map[string]string{field: msg}
	} else {
		f.Message = msg
	}
	s.log.Warn("studio target form refused", "status", e.Status, "code", e.Code)
	return e.Status, true
}

// targetEdit is the Settings' Target card of a deployment, its picker set to the target served.
func targetEdit(d cloudapi.Deployment) views.TargetForm {
	f := views.TargetForm{EndpointID: d.ID, Slug: d.Slug, Current: d.Target.Summary(), Canary: d.Canary != nil,
		Kind: d.Target.Kind, JobID: d.Target.JobID, Model: d.Target.Model}
	if d.Target.Step > 0 {
		f.Step = strconv.FormatInt(d.Target.Step, 10)
	}
	if d.Target.Kind == cloudapi.TargetMultiModel {
		f.Kind = views.KindBaseModel
	}
	return f
}

// retentionEdit is the Settings' run retention card of a deployment.
func retentionEdit(d cloudapi.Deployment) views.RetentionForm {
	return views.NewRetentionForm(d.ID, d.Slug, d.RunRetentionMode, d.RunRetentionDays, retentionText(d.RunRetentionMode, d.RunRetentionDays))
}

// deploymentTargetUpdate is PATCH /api/deployments/{id} sent by the Settings' Target card (HX-Target
// "target-card"): the card comes back alone, saved or with the error under its field.
func (s *Server) deploymentTargetUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	f := targetFormFrom(c, id)
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	cur, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return err
	}
	f.Slug, f.Current = cur.Slug, cur.Target.Summary()
	target, fe := targetOf(f)
	if fe == nil {
		d, err := cl.UpdateDeployment(ctx, id, cloudapi.UpdateDeploymentRequest{Target: &target})
		if err == nil {
			saved := targetEdit(*d)
			saved.Saved = true
			return renderHTML(c, http.StatusOK, views.TargetCard(saved))
		}
		status, mine := s.targetFormError(c, err, &f)
		if !mine {
			return err
		}
		return renderHTML(c, status, views.TargetCard(f))
	}
	status, _ := s.targetFormError(c, fe, &f)
	return renderHTML(c, status, views.TargetCard(f))
}

// deploymentRetentionUpdate is PATCH /api/deployments/{id} sent by the run retention card (HX-Target
// "retention-card"): retentionMode (days, unlimited, none) and, for days, retentionDays.
func (s *Server) deploymentRetentionUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	f := views.RetentionForm{EndpointID: id, Mode: formValue(c, "retentionMode"), Days: strings.TrimSpace(formValue(c, "retentionDays"))}
	req := cloudapi.UpdateDeploymentRequest{RunRetentionMode: &f.Mode}
	switch f.Mode {
	case cloudapi.RetentionDays:
		n, err := strconv.Atoi(f.Days)
		if err != nil || n < 1 {
			f.Errors = map[string]string{"days": "Enter how many days to keep runs: a whole number, 1 or more."}
			return renderHTML(c, http.StatusBadRequest, views.RetentionCard(f))
		}
		req.RunRetentionDays = &n
	case cloudapi.RetentionUnlimited, cloudapi.RetentionNone:
	default:
		f.Message = "Choose how long to keep runs: a number of days, until deleted, or not at all."
		return renderHTML(c, http.StatusBadRequest, views.RetentionCard(f))
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
		if strings.Contains(e.Message, "runRetentionDays") {
			f.Errors = map[string]string{"days": e.problem().Message}
		} else {
			f.Message = e.problem().Message
		}
		return renderHTML(c, e.Status, views.RetentionCard(f))
	}
	saved := retentionEdit(*d)
	saved.Saved = true
	return renderHTML(c, http.StatusOK, views.RetentionCard(saved))
}
