package studio

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// deploymentCreate is POST /api/deployments. JSON callers send the SDK's CreateDeploymentRequest and
// get the created deployment or the upstream error as is. The htmx form gets the reloaded list and
// a fresh form on success (app.js closes the dialog on svc:created), or the same form back with
// each error next to its field, with the upstream status (409 keeps it open with the message).
func (s *Server) deploymentCreate(c echo.Context) error {
	ctx := c.Request().Context()
	if !isHTMX(c) {
		var req cloudapi.CreateDeploymentRequest
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
		cl, err := s.creatingClient(ctx)
		if err != nil {
			return err
		}
		d, err := cl.CreateDeployment(ctx, req)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, d)
	}

	form := createFormFrom(c)
	req, fieldErr := form.request()
	if fieldErr != nil {
		return s.createFormError(c, form, fieldErr)
	}
	cl, err := s.creatingClient(ctx)
	if err != nil {
		return s.createFormError(c, form, err)
	}
	if _, err := cl.CreateDeployment(ctx, req); err != nil {
		return s.createFormError(c, form, err)
	}
	ds, err := cl.ListDeployments(ctx)
	if err != nil {
		// Created, but the list did not reload: the flash says why, the dialog still closes.
		trigger(c, "svc:created", nil)
		return err
	}
	retarget(c, "#main", "innerHTML")
	trigger(c, "svc:created", nil)
	fresh := views.CreateForm{Kind: views.KindFinalAdapter, AuthMode: views.AuthFixedAPIKey, OOB: true}
	return renderHTML(c, http.StatusCreated, templ.Join(views.EndpointList(listView(ds)), views.CreateFormView(fresh)))
}

// createForm is the form as submitted.
type createForm views.CreateForm

func createFormFrom(c echo.Context) createForm {
	return createForm{
		Slug:      strings.TrimSpace(formValue(c, "slug")),
		Kind:      formValue(c, "kind"),
		JobID:     strings.TrimSpace(formValue(c, "jobId")),
		Step:      strings.TrimSpace(formValue(c, "step")),
		Model:     strings.TrimSpace(formValue(c, "model")),
		AuthMode:  formValue(c, "authMode"),
		Submitted: true,
	}
}

// fieldError is a studio-side check that failed before anything was sent upstream.
type fieldError struct {
	field string
	*apiError
}

// request checks what only the form can get wrong (an empty picker, a step that is not a number);
// the rules themselves (slug pattern, reserved words, target validity) are the server's.
func (f createForm) request() (cloudapi.CreateDeploymentRequest, *fieldError) {
	bad := func(field, code, msg string) *fieldError {
		return &fieldError{field: field, apiError: badRequest(code, msg)}
	}
	req := cloudapi.CreateDeploymentRequest{Slug: f.Slug, AuthMode: f.AuthMode}
	if f.Slug == "" {
		return req, bad("slug", "invalid_slug", "Enter a slug: 2–50 lowercase letters, digits and hyphens.")
	}
	switch f.Kind {
	case views.KindFinalAdapter:
		if f.JobID == "" {
			return req, bad("jobId", "invalid_target", "Choose the job whose final adapter to serve.")
		}
		req.Target = cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: f.JobID}
	case views.KindCheckpoint:
		if f.JobID == "" {
			return req, bad("jobId", "invalid_target", "Choose the job of the checkpoint.")
		}
		step, err := strconv.ParseInt(f.Step, 10, 64)
		if err != nil || step < 1 {
			return req, bad("step", "invalid_target", "Enter the checkpoint's step, a whole number from 1.")
		}
		req.Target = cloudapi.Target{Kind: cloudapi.TargetCheckpoint, JobID: f.JobID, Step: step}
	case views.KindBaseModel:
		if f.Model == "" {
			return req, bad("model", "invalid_target", "Choose a base model.")
		}
		req.Target = cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: f.Model}
	default:
		return req, bad("target", "invalid_target", "Choose what the endpoint serves: a final adapter, a checkpoint or a base model.")
	}
	if f.AuthMode != cloudapi.AuthFixedAPIKey && f.AuthMode != cloudapi.AuthNone {
		return req, bad("authMode", "invalid_request", "Choose API key or none.")
	}
	return req, nil
}

// createFormError sends the form back with the error next to its field, or above the form when it
// belongs to no field, keeping the upstream status.
func (s *Server) createFormError(c echo.Context, f createForm, err error) error {
	var field string
	var fe *fieldError
	if errors.As(err, &fe) {
		field, err = fe.field, fe.apiError
	}
	e := toAPIError(err)
	if e.Status >= 500 || e.Status == http.StatusGatewayTimeout {
		// Not the form's fault: the central handler logs it and shows it.
		return err
	}
	if field == "" {
		field = createField(e.Code, f.Kind)
	}
	view := views.CreateForm(f)
	if field != "" {
		view.Errors = map[string]string{field: e.Message}
	} else {
		view.Message = e.Message
	}
	s.log.Warn("studio create refused", "status", e.Status, "code", e.Code)
	return renderHTML(c, e.Status, views.CreateFormView(view))
}

// createField is the form field an upstream error code is about.
func createField(code, kind string) string {
	switch code {
	case "invalid_slug", "reserved_slug", "slug_taken":
		return "slug"
	case "invalid_target":
		if kind == views.KindBaseModel {
			return "model"
		}
		return "jobId"
	}
	return ""
}
