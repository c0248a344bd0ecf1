package api

import (
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

// feedbackBody is PUT .../runs/{runId}/feedback's body: score is required.
type feedbackBody struct {
	Score   *int    `json:"score"`
	Comment *string `json:"comment"`
}

func (h *Handler) runFeedback(c echo.Context) error {
	var in feedbackBody
	if err := decode(c, &in); err != nil {
		return err
	}
	if in.Score == nil {
		return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "score is required: -1, 0 or 1"}
	}
	f := core.Feedback{Score: *in.Score}
	if in.Comment != nil {
		f.Comment = *in.Comment
	}
	run, err := h.svc.SetRunFeedback(c.Request().Context(), project(c), c.Param("id"), c.Param("runId"), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runWire(run))
}

func (h *Handler) runFeedbackClear(c echo.Context) error {
	run, err := h.svc.ClearRunFeedback(c.Request().Context(), project(c), c.Param("id"), c.Param("runId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runWire(run))
}

func feedbackWire(f *core.Feedback) *cloudapi.Feedback {
	if f == nil {
		return nil
	}
	return &cloudapi.Feedback{Score: f.Score, Comment: f.Comment, At: f.At}
}
