package studio

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// The runs card's Export (docs/API.md, "Studio loopback routes"), in three steps, so that the file goes
// to disk as it arrives while errors and counts still reach the page:
//   - POST .../runs/export checks the filters (the API's own rule) and the deployment, and registers a
//     download; its answer tells the page to follow the download link.
//   - GET .../runs/export?filters&download= is that link: the browser saves the API's export as it
//     streams through the studio (64 KiB at a time, never held whole), under the session cookie.
//   - GET .../runs/export/{download} answers once the download ended, with the counts the API sent in
//     its trailers (which a download cannot show) or the error that ended it.

const (
	// maxDownloads bounds the downloads the studio remembers; the oldest are forgotten first.
	maxDownloads = 32
	// downloadTTL is how long a download's result is kept for the page to read.
	downloadTTL = 15 * time.Minute
	// downloadStart is how long a registered download may wait for the browser to ask for it.
	downloadStart = 30 * time.Second
	// resultWait is how long a result request waits for the end before it answers the progress.
	resultWait = 20 * time.Second
)

// download is one export the page started.
type download struct {
	id, deploymentID, file string
	pairs                  bool // preference pairs, not runs
	created                time.Time
	started                atomic.Bool
	lines                  atomic.Int64
	once                   sync.Once
	done                   chan struct{}
	// Set before done is closed.
	counts cloudapi.ExportCounts
	err    *apiError
}

// finish records how the download ended, once; a nil download (a link without one) records nothing.
func (d *download) finish(counts cloudapi.ExportCounts, err *apiError) {
	if d == nil {
		return
	}
	d.once.Do(func() {
		d.counts, d.err = counts, err
		close(d.done)
	})
}

func (d *download) ended() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// downloads are the downloads the page started, by id.
type downloads struct {
	mu sync.Mutex
	m  map[string]*download
}

// add registers a download of a deployment's runs (pairs: preference pairs), forgetting expired ones and, past maxDownloads,
// the oldest.
func (ds *downloads) add(deploymentID, file string, pairs bool, now time.Time) (*download, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	d := &download{id: hex.EncodeToString(b), deploymentID: deploymentID, file: file, pairs: pairs, created: now, done: make(chan struct{})}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.m == nil {
		ds.m = map[string]*download{}
	}
	var oldest *download
	for id, o := range ds.m {
		if now.Sub(o.created) > downloadTTL {
			delete(ds.m, id)
		} else if oldest == nil || o.created.Before(oldest.created) {
			oldest = o
		}
	}
	if len(ds.m) >= maxDownloads && oldest != nil {
		delete(ds.m, oldest.id)
	}
	ds.m[d.id] = d
	return d, nil
}

// get finds a download of this deployment; nil when there is none.
func (ds *downloads) get(id, deploymentID string) *download {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d := ds.m[id]; d != nil && d.deploymentID == deploymentID {
		return d
	}
	return nil
}

// exportFilters reads the export's filters from the form or the query, the API's and the CLI's
// (docs/API.md, "Export"): format (chat-jsonl, the default, or preference-jsonl); since (a duration
// before now, such as 168h; empty for all time); until (a date, whose whole day is included, in the
// studio's time zone, or a duration before now; empty for now); arm (primary or canary; empty for the
// calls clients made); minScore, status and reasoning. They are judged by the API's own rule
// (core.ValidateExport) before any call, and returned as the SDK's options and as the query of the
// download link.
func exportFilters(c echo.Context, now time.Time) (cloudapi.ExportOptions, url.Values, error) {
	o := cloudapi.ExportOptions{Format: cloudapi.ExportChat, Status: formValue(c, "status"), Arm: formValue(c, "arm")}
	q := url.Values{}
	if v := formValue(c, "format"); v != "" {
		o.Format = v
		q.Set("format", v)
	}
	if v := formValue(c, "since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, nil, badRequest("invalid_request", "Since must be a duration before now, such as 168h.")
		}
		o.Since = now.Add(-d)
		q.Set("since", v)
	}
	if v := formValue(c, "until"); v != "" {
		t, err := exportUntil(v, now)
		if err != nil {
			return o, nil, err
		}
		o.Until = t
		q.Set("until", v)
	}
	if v := formValue(c, "minScore"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return o, nil, badRequest("invalid_request", "minScore must be -1, 0 or 1")
		}
		o.MinScore = &n
		q.Set("minScore", v)
	}
	switch v := formValue(c, "reasoning"); v {
	case "":
	case "include":
		o.Reasoning = true
		q.Set("reasoning", v)
	default:
		return o, nil, badRequest("invalid_request", `reasoning must be "include" (or left out)`)
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Arm != "" {
		q.Set("arm", o.Arm)
	}
	req := core.ExportRequest{Format: o.Format, Since: o.Since, Until: o.Until, Arm: o.Arm, Status: o.Status, MinScore: o.MinScore, Reasoning: o.Reasoning}
	if err := core.ValidateExport(&req, now); err != nil {
		var ce *edgemodel.Error
		if errors.As(err, &ce) {
			return o, nil, badRequest("invalid_request", ce.Message)
		}
		return o, nil, err
	}
	return o, q, nil
}

// exportUntil reads the Export's until: a date (the form's date field) includes its whole day, in the
// studio's time zone, which is the browser's on this machine; a duration is that long before now.
func exportUntil(v string, now time.Time) (time.Time, error) {
	if end, ok := cloudapi.ExportDay(v, true); ok {
		return end, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, badRequest("invalid_request", "Until must be a date, such as 2026-11-20, or a duration before now, such as 24h.")
}

// exportFile is the name the browser saves an export under: <slug>-runs.jsonl, or
// <slug>-preferences.jsonl for preference pairs.
func exportFile(slug, format string) string {
	if format == cloudapi.ExportPreference {
		return slug + "-preferences.jsonl"
	}
	return slug + "-runs.jsonl"
}

// runExportStart is POST /api/deployments/{id}/runs/export: the Export form's filters checked and the
// deployment read (another project's is the studio's 404), then a download registered. The page gets
// ExportProgress under the button and the svc:download event with the link to follow.
func (s *Server) runExportStart(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	o, q, err := exportFilters(c, time.Now())
	if err != nil {
		return err
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return err
	}
	dl, err := s.downloads.add(id, exportFile(d.Slug, o.Format), o.Format == cloudapi.ExportPreference, time.Now())
	if err != nil {
		return err
	}
	q.Set("download", dl.id)
	link := "/api/deployments/" + url.PathEscape(id) + "/runs/export?" + q.Encode()
	triggerAfterSettle(c, "svc:download", map[string]string{"url": link})
	return render(c, http.StatusOK, views.ExportProgress(id, dl.id, dl.file, dl.pairs, 0),
		map[string]string{"url": link, "download": dl.id, "file": dl.file})
}

// errNoSession refuses a download without the studio's session.
var errNoSession = &apiError{Status: http.StatusForbidden, Code: "csrf",
	Message: "The studio's session cookie is missing or from an earlier launch: reload the studio page and export again."}

// runExport is GET /api/deployments/{id}/runs/export: the download link. The API's export passes
// through as it streams, as an attachment named after the endpoint (<slug>-runs.jsonl). A plain link
// cannot send the CSRF header, so this read asks for the session cookie the page set (or the header,
// for scripts), then the project and the deployment like every studio route. How it ended is kept for
// the page under the download's id (runExportResult). An export the API ends early is aborted, so
// that the browser reports a failed download rather than saving a file that lacks runs.
func (s *Server) runExport(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	dl := s.downloads.get(c.QueryParam("download"), id)
	if dl != nil && !dl.started.CompareAndSwap(false, true) {
		dl = nil // the link followed again: served, but the page reads the first one's end
	}
	fail := func(err error) error {
		dl.finish(cloudapi.ExportCounts{}, s.toAPIError(err))
		return err
	}
	if !s.hasSession(c) {
		return fail(errNoSession)
	}
	o, _, err := exportFilters(c, time.Now())
	if err != nil {
		return fail(err)
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return fail(err)
	}
	d, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return fail(err)
	}
	x, err := cl.ExportRuns(ctx, id, o)
	if err != nil {
		return fail(err)
	}
	return s.passExport(c, x, exportFile(d.Slug, o.Format), dl)
}

// passExport passes an API export through to the browser as the attachment file as it streams (64 KiB
// at a time), keeping how it ended in dl (nil: a link without a download to report to). An export the
// API ends early is aborted, so that the browser reports a failed download rather than saving a file
// that lacks lines.
func (s *Server) passExport(c echo.Context, x *cloudapi.RunExport, file string, dl *download) error {
	defer x.Close()
	id := c.Param("id")
	w := c.Response()
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 64<<10)
	var lines int64
	for {
		n, rerr := x.Read(buf)
		if n > 0 {
			lines += int64(bytes.Count(buf[:n], []byte{'\n'}))
			if dl != nil {
				dl.lines.Store(lines)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				dl.finish(cloudapi.ExportCounts{}, &apiError{Status: 499, Code: "download_cancelled", Cause: err,
					Message: fmt.Sprintf("The download stopped after %s lines: the browser cancelled it, and the file is incomplete.", views.Count(lines))})
				return nil
			}
			w.Flush()
		}
		if rerr == io.EOF {
			counts, cerr := x.Counts()
			if cerr == nil {
				dl.finish(counts, nil)
				return nil
			}
			rerr = cerr
		}
		if rerr != nil {
			s.log.Warn("studio: export cut", "deployment", id, "lines", lines, "err", rerr.Error())
			dl.finish(cloudapi.ExportCounts{}, &apiError{Status: http.StatusBadGateway, Code: "export_cut", Cause: rerr,
				Message: fmt.Sprintf("The export ended early after %s lines, so the browser reports a failed download: export again.", views.Count(lines))})
			panic(http.ErrAbortHandler)
		}
	}
}

// hasSession reports whether a request carries the studio's session: the cookie the page set
// (SameSite=Strict, so a link on another site does not carry it), or the CSRF header.
func (s *Server) hasSession(c echo.Context) bool {
	if ck, err := c.Cookie(s.sessionCookieName()); err == nil && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(s.session)) == 1 {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(c.Request().Header.Get(csrfHeader)), []byte(s.csrf)) == 1
}

// sessionCookieName names the session cookie after the studio's port: browsers share a host's cookies
// among its ports, and two studios must not overwrite each other's.
func (s *Server) sessionCookieName() string {
	return "svc_studio_" + strconv.FormatInt(s.port.Load(), 10)
}

// setSessionCookie gives the page the studio's session, for its download links.
func (s *Server) setSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: s.sessionCookieName(), Value: s.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// runExportResult is GET /api/deployments/{id}/runs/export/{download}: how a download ended. It waits
// up to resultWait for the end; until then it answers the progress, which asks again.
func (s *Server) runExportResult(c echo.Context) error {
	id := c.Param("id")
	dl := s.downloads.get(c.Param("download"), id)
	if dl == nil {
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "The studio no longer knows this export: export again."}
	}
	t := time.NewTimer(resultWait)
	defer t.Stop()
	select {
	case <-dl.done:
	case <-t.C:
	case <-c.Request().Context().Done():
		return c.Request().Context().Err()
	}
	if !dl.ended() {
		if !dl.started.Load() && time.Since(dl.created) > downloadStart {
			dl.finish(cloudapi.ExportCounts{}, &apiError{Status: http.StatusGatewayTimeout, Code: "download_not_started",
				Message: "The browser did not start the download: export again."})
		} else {
			lines := dl.lines.Load()
			return render(c, http.StatusOK, views.ExportProgress(id, dl.id, dl.file, dl.pairs, lines),
				map[string]any{"file": dl.file, "done": false, "lines": lines})
		}
	}
	if dl.err != nil {
		return dl.err
	}
	summary := views.ExportSummary(dl.file, dl.pairs, dl.counts.Written, dl.counts.Skipped)
	return render(c, http.StatusOK, views.ExportDone(summary),
		map[string]any{"file": dl.file, "done": true, "written": dl.counts.Written, "skipped": dl.counts.Skipped, "summary": summary})
}
