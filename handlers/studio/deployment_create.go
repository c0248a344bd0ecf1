package studio

import (
	"context"
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
// get the created deployment or the upstream error as is. On success the form closes and the list
// reloads (docs/API.md, "Studio loopback routes", rule 4): the htmx form gets the list, read afresh,
// with the new endpoint's row marked, a notice with a link to its page, and a fresh form; app.js
// closes the dialog on svc:created, points the hash route at the list and puts focus on the new
// row's link. A failure sends the same form back with each error next to its field (409 keeps it
// open with the message).
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
		if fieldErr.field == "step" && form.JobID != "" {
			fieldErr = s.stepError(ctx, form.JobID, fieldErr)
		}
		return s.createFormError(c, form, fieldErr)
	}
	cl, err := s.creatingClient(ctx)
	if err != nil {
		return s.createFormError(c, form, err)
	}
	d, err := cl.CreateDeployment(ctx, req)
	if err != nil {
		return s.createFormError(c, form, err)
	}
	retarget(c, "#main", "innerHTML")
	triggerAfterSettle(c, "svc:created", createdEvent{ID: d.ID, Slug: d.Slug, Notice: "Created endpoint " + d.Slug + "."})
	fresh := views.NewCreateForm()
	fresh.OOB = true
	return renderHTML(c, http.StatusCreated, templ.Join(s.listAfterCreate(ctx, cl, d), views.CreatedNotice(d.Slug, d.ID), views.CreateFormView(fresh)))
}

// listAfterCreate is the list's first page with the new endpoint's row marked. The endpoint exists
// whatever happens here, so a list that cannot be read is shown as the list's error view (with
// Retry) while the form still closes and the notice still links to the new endpoint.
func (s *Server) listAfterCreate(ctx context.Context, cl *cloudapi.Client, d *cloudapi.Deployment) templ.Component {
	page, err := cl.ListDeploymentsPage(ctx, cloudapi.ListOptions{Limit: s.pageSize})
	if err != nil {
		e := s.toAPIError(err)
		s.log.Warn("studio: list after create", "status", e.Status, "code", e.Code, "err", err)
		return views.ErrorView(views.ErrorPage{Problem: e.problem(), Title: listErrorTitle, Retry: true})
	}
	l := listView(page.Deployments)
	l.NextCursor, l.Created = page.NextCursor, d.ID
	return views.EndpointList(l)
}

// createdEvent is the detail of svc:created: where the new endpoint is and what to tell the user.
type createdEvent struct {
	ID     string `json:"id"`
	Slug   string `json:"slug"`
	Notice string `json:"notice"`
}

// stepError words a missing step with the steps the job has, so the user sees what to pick (the
// step picker lists them too). Without the job, the plain message stands.
func (s *Server) stepError(ctx context.Context, jobID string, fe *fieldError) *fieldError {
	cl, err := s.projectClient(ctx)
	if err != nil {
		return fe
	}
	job, err := cl.GetJob(ctx, jobID)
	if err != nil {
		return fe
	}
	msg := "Job " + shortID(job.ID) + " has no checkpoints yet: choose another job, or serve its final adapter or a base model."
	if len(job.Checkpoints) > 0 {
		steps := make([]string, len(job.Checkpoints))
		for i, ck := range job.Checkpoints {
			steps[i] = strconv.FormatInt(ck.Step, 10)
		}
		msg = "Choose one of the job's checkpoints: step " + steps[0] + "."
		if len(steps) > 1 {
			msg = "Choose one of the job's checkpoints: steps " + strings.Join(steps, ", ") + "."
		}
	}
	return &fieldError{field: "step", apiError: badRequest("invalid_target", msg)}
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
	// Without a job there is nothing to pick: say how to get one and what needs none.
	const noJob = " No job in the list? Register one with svc jobs create (or the SDK's CreateJob), or choose Base model."
	switch f.Kind {
	case views.KindFinalAdapter:
		if f.JobID == "" {
			return req, bad("jobId", "invalid_target", "Choose the job whose final adapter to serve."+noJob)
		}
		req.Target = cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: f.JobID}
	case views.KindCheckpoint:
		if f.JobID == "" {
			return req, bad("jobId", "invalid_target", "Choose the job of the checkpoint."+noJob)
		}
		step, err := strconv.ParseInt(f.Step, 10, 64)
		if err != nil || step < 1 {
			return req, bad("step", "invalid_target", "Choose one of the job's checkpoints.")
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
	e := s.toAPIError(err)
	if e.Status >= 500 || e.Status == http.StatusGatewayTimeout {
		// Not the form's fault: the central handler logs it and shows it.
		return err
	}
	if field == "" {
		field = createField(e, f.Kind)
	}
	view := views.CreateForm(f)
	msg := e.problem().Message
	if field != "" {
		view.Errors = map[string]string{field: msg}
	} else {
		view.Message = msg
	}
	s.log.Warn("studio create refused", "status", e.Status, "code", e.Code)
	return renderHTML(c, e.Status, views.CreateFormView(view))
}

// createField is the form field an upstream error is about. The API names the problem by code; for a
// checkpoint target, whether the job or the step is wrong shows only in the message ("job … has no
// checkpoint at step 7").
func createField(e *apiError, kind string) string {
	switch e.Code {
	case "invalid_slug", "reserved_slug", "slug_taken":
		return "slug"
	case "invalid_target":
		switch {
		case kind == views.KindBaseModel:
			return "model"
		case kind == views.KindCheckpoint && strings.Contains(e.Message, "step"):
			return "step"
		}
		return "jobId"
	}
	return ""
}

// shortID is the first 8 characters of a job's UUID, as target summaries show it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
