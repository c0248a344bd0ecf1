package studio

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// runFeedback is PUT /api/deployments/{id}/runs/{runId}/feedback (score 1, -1 or 0; comment): the
// run's Good, Neutral and Bad. The page gets the run's feedback back, the one given pressed.
func (s *Server) runFeedback(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	score, err := strconv.Atoi(formValue(c, "score"))
	if err != nil {
		return badRequest("invalid_request", "The score must be 1, -1 or 0.")
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	r, err := cl.SetRunFeedback(ctx, id, c.Param("runId"), cloudapi.SetRunFeedbackRequest{Score: score, Comment: formValue(c, "comment")})
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.RunFeedback(runView(id, r.RunSummary, nil)), r)
}

// runFeedbackClear is DELETE /api/deployments/{id}/runs/{runId}/feedback: the run's Clear, which
// removes its feedback. The page gets the run's feedback back, none given.
func (s *Server) runFeedbackClear(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	r, err := cl.ClearRunFeedback(ctx, id, c.Param("runId"))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.RunFeedback(runView(id, r.RunSummary, nil)), r)
}
