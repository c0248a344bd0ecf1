package studio

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// runFeedback is PUT /api/deployments/{id}/runs/{runId}/feedback (score 1, -1 or 0; comment): the
// run's thumbs. The page gets the thumbs back, the one given pressed.
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

// runExport is GET /api/deployments/{id}/runs/export: the runs as a fine-tuning dataset, passed
// through from the API as it streams (never held whole), saved by the browser as a file. since is a
// duration before now ("168h"); minScore, status and reasoning as the API takes them.
func (s *Server) runExport(c echo.Context) error {
	ctx := c.Request().Context()
	q := c.QueryParams()
	o := cloudapi.ExportOptions{Status: q.Get("status"), Reasoning: q.Get("reasoning") == "include"}
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return badRequest("invalid_request", "Since must be a duration such as 168h.")
		}
		o.Since = time.Now().Add(-d)
	}
	if v := q.Get("minScore"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return badRequest("invalid_request", "The minimum score must be -1, 0 or 1.")
		}
		o.MinScore = &n
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	x, err := cl.ExportRuns(ctx, c.Param("id"), o)
	if err != nil {
		return err
	}
	defer x.Close()
	w := c.Response()
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="runs.jsonl"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 64<<10)
	for {
		n, rerr := x.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return nil // the browser went away
			}
			w.Flush()
		}
		if rerr == io.EOF {
			if _, err := x.Counts(); err == nil {
				return nil
			}
		}
		if rerr != nil {
			// Cut, or ended early by the server: abort the answer, so that the browser reports a failed
			// download rather than saving a file that lacks runs.
			panic(http.ErrAbortHandler)
		}
	}
}
