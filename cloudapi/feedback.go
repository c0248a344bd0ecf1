package cloudapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Feedback and dataset export (docs/API.md, "Feedback" and "Export").

// Feedback is the feedback given on a run: score -1, 0 or 1, and an optional comment.
type Feedback struct {
	Score   int       `json:"score"`
	Comment string    `json:"comment,omitempty"`
	At      time.Time `json:"at"`
}

// FeedbackCounts count the feedback scores given to runs: up (1), down (-1) and neutral (0).
type FeedbackCounts struct {
	Up      int64 `json:"up"`
	Down    int64 `json:"down"`
	Neutral int64 `json:"neutral"`
}

// SetRunFeedbackRequest is the body of PUT .../runs/{runId}/feedback.
type SetRunFeedbackRequest struct {
	Score   int    `json:"score"`
	Comment string `json:"comment,omitempty"`
}

// SetRunFeedback gives feedback on a run (replacing any given before) and returns the run.
func (c *Client) SetRunFeedback(ctx context.Context, deploymentID, runID string, in SetRunFeedbackRequest) (*Run, error) {
	p, err := c.projectPath("deployments", deploymentID, "runs", runID, "feedback")
	if err != nil {
		return nil, err
	}
	var out Run
	if err := c.do(ctx, http.MethodPut, p, nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ClearRunFeedback removes the feedback given on a run, if any, and returns the run.
func (c *Client) ClearRunFeedback(ctx context.Context, deploymentID, runID string) (*Run, error) {
	p, err := c.projectPath("deployments", deploymentID, "runs", runID, "feedback")
	if err != nil {
		return nil, err
	}
	var out Run
	if err := c.do(ctx, http.MethodDelete, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportDay reads a date (2026-11-20) given as an export's since or until, in the local time zone (the
// studio's, which is the browser's on this machine, and the CLI's): the start of the day, or with end
// the start of the next one, so that an until date includes its whole day. ok is false for anything
// that is not a date.
func ExportDay(v string, end bool) (t time.Time, ok bool) {
	day, err := time.ParseInLocation(time.DateOnly, v, time.Local)
	if err != nil {
		return time.Time{}, false
	}
	if end {
		day = day.AddDate(0, 0, 1)
	}
	return day, true
}

// Export formats.
const (
	ExportChat       = "chat-jsonl"
	ExportPreference = "preference-jsonl"
)

// Trailers of an export's answer: the runs written, and those left out by reason
// ("no_transcript=3, failed=1"); an export that failed after its first line says why in ExportError.
const (
	ExportWrittenTrailer = "Svc-Export-Written"
	ExportSkippedTrailer = "Svc-Export-Skipped"
	ExportErrorTrailer   = "Svc-Export-Error"
)

// ExportOptions choose the runs an export writes. Zero values leave the choice to the server.
type ExportOptions struct {
	Format    string    // ExportChat (default) or ExportPreference
	Since     time.Time // runs made at or after; zero: from the first
	Until     time.Time // runs made before; zero: now
	Arm       string    // "primary" or "canary"; "" for both
	Status    string    // "ok" (complete answers, the default) or "all" (cut answers too)
	MinScore  *int      // only runs whose feedback scored this or more
	Reasoning bool      // keep reasoning as the assistant messages' reasoning_content
}

func (o ExportOptions) query() url.Values {
	q := url.Values{}
	f := o.Format
	if f == "" {
		f = ExportChat
	}
	q.Set("format", f)
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		q.Set("until", o.Until.UTC().Format(time.RFC3339Nano))
	}
	if o.Arm != "" {
		q.Set("arm", o.Arm)
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.MinScore != nil {
		q.Set("minScore", strconv.Itoa(*o.MinScore))
	}
	if o.Reasoning {
		q.Set("reasoning", "include")
	}
	return q
}

// RunExport is an export being read: its lines (JSONL, one run a line) as they arrive; once read to
// the end, Counts says what was written and left out.
type RunExport struct {
	resp *http.Response
}

// Read reads the export's lines.
func (e *RunExport) Read(p []byte) (int, error) { return e.resp.Body.Read(p) }

// Close ends the export (early, if it is not read to the end).
func (e *RunExport) Close() error { return e.resp.Body.Close() }

// ExportCounts say what an export wrote and what it left out, by reason (docs/API.md, "Export").
type ExportCounts struct {
	Written int
	Skipped map[string]int
	// Reasons are Skipped's reasons in the order the server named them.
	Reasons []string
}

// Counts reads the export's trailers, once the body was read to its end: an error when the server
// ended the export early (ExportErrorTrailer) or sent no counts (the answer was cut).
func (e *RunExport) Counts() (ExportCounts, error) {
	t := e.resp.Trailer
	if msg := t.Get(ExportErrorTrailer); msg != "" {
		return ExportCounts{}, fmt.Errorf("cloudapi: the export ended early: %s", msg)
	}
	written := t.Get(ExportWrittenTrailer)
	if written == "" {
		return ExportCounts{}, errors.New("cloudapi: the export's answer carried no counts (read it to the end first; a cut answer has none)")
	}
	n, err := strconv.Atoi(written)
	if err != nil {
		return ExportCounts{}, fmt.Errorf("cloudapi: the export's %s is %q", ExportWrittenTrailer, written)
	}
	out := ExportCounts{Written: n, Skipped: map[string]int{}}
	for _, part := range strings.Split(t.Get(ExportSkippedTrailer), ",") {
		reason, count, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		if v, err := strconv.Atoi(count); err == nil {
			if _, seen := out.Skipped[reason]; !seen {
				out.Reasons = append(out.Reasons, reason)
			}
			out.Skipped[reason] = v
		}
	}
	return out, nil
}

// ExportRuns starts an export of a deployment's runs as a fine-tuning dataset. The caller reads the
// lines and closes the export; errors before the first line (bad options, an unknown deployment) are
// *Error, as for every call.
func (c *Client) ExportRuns(ctx context.Context, deploymentID string, opts ExportOptions) (*RunExport, error) {
	p, err := c.projectPath("deployments", deploymentID, "runs", "export")
	if err != nil {
		return nil, err
	}
	return c.export(ctx, p, opts.query())
}

// ExportEval starts an export of an eval's judged pairs as preference lines (docs/API.md, "Evals"):
// for each pair the judge ranked, the source run's conversation, the answer it preferred and the other.
// The caller reads the lines and closes the export; Counts counts ties as "tie". An eval without a
// judge is an *Error (400).
func (c *Client) ExportEval(ctx context.Context, deploymentID, evalID string) (*RunExport, error) {
	p, err := c.projectPath("deployments", deploymentID, "evals", evalID, "export")
	if err != nil {
		return nil, err
	}
	return c.export(ctx, p, nil)
}

// export starts a streamed export at path p with query q.
func (c *Client) export(ctx context.Context, p string, q url.Values) (*RunExport, error) {
	if c.BaseURL == "" {
		return nil, fmt.Errorf("cloudapi: GET %s: no base URL set", p)
	}
	u := strings.TrimRight(c.BaseURL, "/") + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("cloudapi: GET %s: %w", p, err)
	}
	req.Header.Set("Accept", "application/jsonl")
	resp, err := c.send(req, exportHTTPClient)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return &RunExport{resp: resp}, nil
}

var _ io.ReadCloser = (*RunExport)(nil)

// exportHTTPClient reads exports: an export of many runs takes as long as it takes, bounded by the
// caller's context rather than defaultHTTPClient's overall timeout.
var exportHTTPClient = &http.Client{}
