package api

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

// runExport streams GET .../runs/export as JSONL (docs/API.md, "Export"): a line per run as core
// writes it, flushed a page at a time; the counts follow in trailers, since a last line of counts would
// not be a fine-tuning line. An error after the first byte can no longer change the status: it is the
// ExportError trailer, and the counts trailers are left out.
func (h *Handler) runExport(c echo.Context) error {
	req, err := exportRequest(c)
	if err != nil {
		return err
	}
	return h.streamExport(c, func(write func([]byte) error, flush func()) (core.ExportCounts, error) {
		return h.svc.ExportRuns(c.Request().Context(), project(c), c.Param("id"), req, write, flush)
	})
}

// evalExport streams GET .../evals/{evalId}/export: the eval's judged pairs as preference lines
// (docs/API.md, "Evals"), as the run export streams its lines. It takes no parameters: the eval chose
// its runs, and a pair is the eval's own (the run export's filters would not apply).
func (h *Handler) evalExport(c echo.Context) error {
	if q := c.QueryParams(); len(q) > 0 {
		return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: fmt.Sprintf("unknown parameter %q; an eval's export takes none", slices.Sorted(maps.Keys(q))[0])}
	}
	return h.streamExport(c, func(write func([]byte) error, flush func()) (core.ExportCounts, error) {
		return h.svc.ExportEval(c.Request().Context(), project(c), c.Param("id"), c.Param("evalId"), write, flush)
	})
}

// streamExport writes the lines run writes as JSONL, flushed when it flushes (a page at a time), and
// the counts in trailers; an error before the first line is the error's own status and envelope.
func (h *Handler) streamExport(c echo.Context, run func(write func([]byte) error, flush func()) (core.ExportCounts, error)) error {
	w := c.Response()
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Trailer", cloudapi.ExportWrittenTrailer+", "+cloudapi.ExportSkippedTrailer+", "+cloudapi.ExportErrorTrailer)
		w.WriteHeader(http.StatusOK)
	}
	write := func(line []byte) error {
		start()
		if _, err := w.Write(line); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	}
	counts, err := run(write, func() {
		if started {
			w.Flush()
		}
	})
	if err != nil && !started {
		return err // nothing sent yet: the error's own status and envelope
	}
	start()
	if err != nil {
		h.log.Error("export ended early", "deployment", c.Param("id"), "err", err)
		w.Header().Set(cloudapi.ExportErrorTrailer, "the export could not be completed; the lines sent are complete, but lines are missing")
		return nil
	}
	w.Header().Set(cloudapi.ExportWrittenTrailer, strconv.Itoa(counts.Written))
	parts := make([]string, 0, len(counts.Skipped))
	for _, r := range counts.SkippedReasons() {
		parts = append(parts, fmt.Sprintf("%s=%d", r, counts.Skipped[r]))
	}
	w.Header().Set(cloudapi.ExportSkippedTrailer, strings.Join(parts, ", "))
	return nil
}

// exportRequest reads the export's query: format, since and until (RFC 3339), arm, status,
// minScore (-1, 0 or 1) and reasoning (include); core judges the values.
func exportRequest(c echo.Context) (core.ExportRequest, error) {
	q := c.QueryParams()
	for name := range q {
		switch name {
		case "format", "since", "until", "arm", "status", "minScore", "reasoning":
		default:
			return core.ExportRequest{}, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest,
				Message: fmt.Sprintf("unknown parameter %q; the export takes format, since, until, arm, status, minScore and reasoning", name)}
		}
	}
	req := core.ExportRequest{Format: q.Get("format"), Arm: q.Get("arm"), Status: q.Get("status")}
	if req.Format == "" {
		req.Format = core.ExportChat
	}
	for _, t := range []struct {
		name string
		into *time.Time
	}{{"since", &req.Since}, {"until", &req.Until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return req, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: t.name + " must be an RFC 3339 time (2026-01-02T15:04:05Z)"}
			}
			*t.into = at
		}
	}
	if v := q.Get("minScore"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return req, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "minScore must be -1, 0 or 1"}
		}
		req.MinScore = &n
	}
	switch q.Get("reasoning") {
	case "":
	case "include":
		req.Reasoning = true
	default:
		return req, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: `reasoning must be "include" (or left out)`}
	}
	return req, nil
}
