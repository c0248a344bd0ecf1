package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgemodel"
)

func (h *Handler) runList(c echo.Context) error {
	limit, cursor, err := pageQuery(c)
	if err != nil {
		return err
	}
	f, err := runFilter(c)
	if err != nil {
		return err
	}
	page, err := h.svc.ListRuns(c.Request().Context(), project(c), c.Param("id"), f, limit, cursor)
	if err != nil {
		return err
	}
	out := cloudapi.RunPage{Runs: make([]cloudapi.RunSummary, len(page.Items)), NextCursor: page.NextCursor}
	for i, r := range page.Items {
		out.Runs[i] = runSummaryWire(r)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) runGet(c echo.Context) error {
	run, err := h.svc.GetRun(c.Request().Context(), project(c), c.Param("id"), c.Param("runId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runWire(run))
}

// runFilter reads the run listing's filters: status, key, arm, surface, since and until (RFC 3339), and
// preview (true: each run's prompt preview); core judges the values. An unknown parameter is refused, naming those the listing takes.
func runFilter(c echo.Context) (core.RunFilter, error) {
	q := c.QueryParams()
	for name := range q {
		switch name {
		case "limit", "cursor", "status", "key", "arm", "surface", "since", "until", "preview":
		default:
			return core.RunFilter{}, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest,
				Message: fmt.Sprintf("unknown parameter %q; the run listing takes limit, cursor, status, key, arm, surface, since, until and preview", name)}
		}
	}
	f := core.RunFilter{Status: q.Get("status"), KeyID: q.Get("key"), Arm: q.Get("arm"), Surface: q.Get("surface")}
	switch q.Get("preview") {
	case "", "false":
	case "true":
		f.Preview = true
	default:
		return f, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "preview must be true or false"}
	}
	for _, t := range []struct {
		name string
		into *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: t.name + " must be an RFC 3339 time (2026-01-02T15:04:05Z)"}
			}
			*t.into = at
		}
	}
	return f, nil
}
